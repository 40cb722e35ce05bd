import { performance } from 'node:perf_hooks';
import { AppError } from '../http/errors.js';
import type { ChannelListener } from './listener.js';

export const tooManyWaiters = () =>
  new AppError(503, 'too_many_waiters', 'too many long-polls are waiting on this instance; retry shortly or poll without wait');

export interface LongPoll<T> {
  /** The state as stored now; may throw (e.g. 404) like any read. */
  read(): Promise<T>;
  /** True when the state is what the caller waits for: answer at once. */
  ready(state: T): boolean;
  /** Tells a waiter gauge about one more (+1) or one fewer (-1) long-poll blocked until its next wake. */
  onWaiting(delta: 1 | -1): void;
  /**
   * After a read that is not ready: how long to wait at most before reading again even without a
   * wake (for what can become ready with no notification); undefined: until a wake or the deadline.
   */
  recheckMs?(state: T): Promise<number | undefined>;
  /** Reads at most this often, however often wakes come (a wait for anything is woken by every commit). */
  minReadIntervalMs?: number;
  /** Aborted when nobody awaits the answer any more (the client closed its connection): the waiter is freed at once. */
  abandoned?: AbortSignal;
}

export interface WaitContext {
  /** The process's listener on the channel; undefined before the app is ready. */
  listener: ChannelListener | undefined;
  /** Aborted when the app starts closing: waiters answer with what is stored, at once. */
  closing: AbortSignal;
}

/**
 * Reads state held until it is ready (a notification for key, or for anything when key is
 * undefined, from any instance, wakes the wait) or waitS seconds pass. The waiter is registered
 * before state is read, and a wake that comes during a read is kept for the next wait, so no
 * committed change can slip by unnoticed. A wait nobody awaits any more (poll.abandoned) ends at
 * once: a client that gave up must not hold one of the bounded waiters until its deadline. Past
 * the listener's waiter bound (one for each kind of long-poll: keyed, keyless) a state that is not
 * ready is refused with 503 too_many_waiters.
 */
export async function longPoll<T>(context: WaitContext, key: string | undefined, waitS: number, poll: LongPoll<T>): Promise<T> {
  const { listener, closing } = context;
  if (waitS <= 0 || closing.aborted || !listener) return poll.read();
  const deadline = performance.now() + waitS * 1000;
  const waiter = listener.register(key);
  if (!waiter) {
    const state = await poll.read();
    if (poll.ready(state)) return state;
    throw tooManyWaiters();
  }
  try {
    let lastRead = -Infinity;
    for (;;) {
      const sinceRead = performance.now() - lastRead;
      if (poll.minReadIntervalMs !== undefined && sinceRead < poll.minReadIntervalMs && !closing.aborted && !poll.abandoned?.aborted) {
        // Cut short when the app starts closing or the client leaves: the read below then answers
        // (or is refused, abandoned) at once.
        await pause(Math.min(poll.minReadIntervalMs - sinceRead, Math.max(0, deadline - performance.now())), closing, poll.abandoned);
      }
      lastRead = performance.now();
      const state = await poll.read();
      const remaining = deadline - performance.now();
      if (poll.ready(state) || remaining <= 0 || closing.aborted || poll.abandoned?.aborted) return state;
      const recheck = await poll.recheckMs?.(state);
      poll.onWaiting(1);
      try {
        await waiter.next(recheck === undefined ? remaining : Math.min(remaining, recheck), closing, poll.abandoned);
      } finally {
        poll.onWaiting(-1);
      }
    }
  } finally {
    waiter.cancel();
  }
}

/**
 * Resolves after ms, or at once when either signal aborts. Its listeners go when it resolves
 * (AbortSignal.any would keep each pause reachable from the app's closing signal until collected).
 */
function pause(ms: number, signal: AbortSignal, also: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      also?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
    also?.addEventListener('abort', done, { once: true });
  });
}
