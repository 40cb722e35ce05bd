import { performance } from 'node:perf_hooks';
import { AppError } from '../errors.js';
import type { ChannelListener } from './listener.js';

export const tooManyWaiters = () =>
  new AppError(503, 'too_many_waiters', 'too many long-polls are waiting on this instance; retry shortly or poll without wait');

export interface LongPoll<T> {
  /** The state as stored now; may throw (e.g. 404) like any read. */
  read(): Promise<T>;
  /** True when the state is what the caller waits for: answer at once. */
  ready(state: T): boolean;
  /** Tells a waiter gauge about one more (+1) or one fewer (-1) waiter. */
  onWaiting(delta: 1 | -1): void;
}

export interface WaitContext {
  /** The process's listener on the channel; undefined before the app is ready. */
  listener: ChannelListener | undefined;
  /** Aborted when the app starts closing: waiters answer with what is stored, at once. */
  closing: AbortSignal;
}

/**
 * Reads state held until it is ready (a notification for key, from any instance, wakes the wait)
 * or waitS seconds pass. The waiter is registered before state is read, and a wake that comes
 * during a read is kept for the next wait, so no committed change can slip by unnoticed.
 */
export async function longPoll<T>(context: WaitContext, key: string, waitS: number, poll: LongPoll<T>): Promise<T> {
  const { listener, closing } = context;
  if (waitS <= 0 || closing.aborted || !listener) return poll.read();
  const deadline = performance.now() + waitS * 1000;
  const waiter = listener.register(key);
  if (!waiter) {
    const state = await poll.read();
    if (poll.ready(state)) return state;
    throw tooManyWaiters();
  }
  poll.onWaiting(1);
  try {
    for (;;) {
      const state = await poll.read();
      const remaining = deadline - performance.now();
      if (poll.ready(state) || remaining <= 0 || closing.aborted) return state;
      await waiter.next(remaining, closing);
    }
  } finally {
    waiter.cancel();
    poll.onWaiting(-1);
  }
}
