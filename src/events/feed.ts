import { performance } from 'node:perf_hooks';
import type { Kysely } from 'kysely';
import type { Tables } from '../db/types.js';
import { AppError } from '../errors.js';
import { feedCursor } from '../http/cursor.js';
import type { EventView } from './schemas.js';
import { type EventRow, type FeedFilter, feedHeldBack, readFeed } from './sql.js';

/** Committed events not yet readable (an older transaction still runs) are looked for this often. */
const HELD_BACK_RECHECK_MS = 25;
const MAX_WAITERS = 2000;
/**
 * A waiting feed re-reads at most this often: every committed change on any instance wakes every
 * feed waiter (a notification says which customer, not which event), and a busy gateway commits
 * hundreds a second.
 */
const MIN_REREAD_MS = 50;

export function eventView(row: EventRow): EventView {
  return {
    id: row.public_id,
    type: row.type,
    timestamp: new Date(row.created_at).toISOString(),
    data: row.data as EventView['data'],
    deliveries: (row.deliveries ?? []).map((d) => ({
      url: d.url,
      status: d.status,
      attempts: d.attempts,
      lastAttemptAt: d.last_attempt_at === null ? null : new Date(d.last_attempt_at).toISOString(),
      lastStatus: d.last_status,
      lastError: d.last_error,
    })),
  };
}

/**
 * Wakes feed long-polls on any notification of the results channel (a committed change on any
 * instance) and whenever its listener (re)connects, when notifications may have been missed.
 */
export class FeedWakeups {
  #generation = 0;
  #waiting = new Set<() => void>();

  readonly bump = (): void => {
    this.#generation++;
    for (const resolve of this.#waiting) resolve();
    this.#waiting.clear();
  };

  get generation(): number {
    return this.#generation;
  }

  get size(): number {
    return this.#waiting.size;
  }

  /** Resolves once the generation moves past `seen`, after ms, or on abort. */
  next(seen: number, ms: number, signal: AbortSignal): Promise<void> {
    if (this.#generation !== seen || signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.#waiting.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener('abort', done, { once: true });
      this.#waiting.add(done);
    });
  }
}

export interface FeedDeps {
  db: Kysely<Tables>;
  wakeups: FeedWakeups | undefined;
  closing: AbortSignal;
  onWaiting?: (delta: 1 | -1) => void;
  /** The configured webhook targets' keys: an event whose delivery to one is not written yet shows it pending. */
  keys?: readonly string[];
}

export interface FeedRequest extends FeedFilter {
  after?: string | undefined;
  limit: number;
  waitS: number;
}

/** One page of the feed; with waitS, held while nothing is newer than `after`. */
export async function readFeedPage(deps: FeedDeps, q: FeedRequest): Promise<{ items: EventView[]; nextCursor: string | null }> {
  const after = q.after === undefined ? undefined : feedCursor.decode(q.after);
  const filter = { type: q.type, customerUuid: q.customerUuid };
  const deadline = performance.now() + q.waitS * 1000;
  const wakeups = deps.wakeups;
  if (q.waitS > 0 && wakeups && wakeups.size >= MAX_WAITERS) {
    throw new AppError(503, 'too_many_waiters', 'too many long-polls are waiting on this instance; retry shortly or poll without wait');
  }
  let lastRead = 0;
  for (;;) {
    const sinceRead = performance.now() - lastRead;
    if (sinceRead < MIN_REREAD_MS && !deps.closing.aborted) {
      await new Promise((resolve) => setTimeout(resolve, Math.min(MIN_REREAD_MS - sinceRead, Math.max(0, deadline - performance.now()))));
    }
    lastRead = performance.now();
    // Noted before reading: a change committed during the read still wakes the wait below.
    const seen = wakeups?.generation ?? 0;
    const rows = await readFeed(deps.db, filter, after, q.limit, deps.keys);
    const remaining = deadline - performance.now();
    if (rows.length > 0 || remaining <= 0 || deps.closing.aborted || !wakeups) {
      const last = rows.at(-1);
      return { items: rows.map(eventView), nextCursor: last ? feedCursor.encode({ tx: last.tx_id, id: last.id }) : (q.after ?? null) };
    }
    const held = await feedHeldBack(deps.db, filter, after);
    deps.onWaiting?.(1);
    try {
      await wakeups.next(seen, held ? Math.min(remaining, HELD_BACK_RECHECK_MS) : remaining, deps.closing);
    } finally {
      deps.onWaiting?.(-1);
    }
  }
}
