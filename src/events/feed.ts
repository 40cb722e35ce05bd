import type { Kysely } from 'kysely';
import type { Tables } from '../db/types.js';
import type { NotificationChannel } from '../channels/channel.js';
import { feedCursor } from '../http/cursor.js';
import type { EventView } from './schemas.js';
import { type EventRow, type FeedFilter, feedHeldBack, readFeed } from './feed-sql.js';
import type { ReadLimiter } from './read-limiter.js';

/** Committed events not yet readable (an older transaction still runs) are looked for this often. */
const HELD_BACK_RECHECK_MS = 25;
/**
 * Feed reads (a page or a held-back check) running at once on this instance; the others queue here
 * (read-limiter.ts), not in the database pool. Every commit wakes every feed waiter, and a waiter
 * whose filter matches nothing new reads again each time: two thousand of them took every pooled
 * connection (and the single one of PGlite), so that submits, callbacks and every other read queued
 * behind them. A request's first read goes ahead of those reads again, so that a page a client
 * asked for is not served after every waiter's.
 */
export const FEED_READS_IN_FLIGHT = 2;

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

export interface FeedDeps {
  db: Kysely<Tables>;
  /** The results channel's wait for anything new (a committed change on any instance). */
  waitAny: NotificationChannel['waitAny'];
  onWaiting?: (delta: 1 | -1) => void;
  /** The configured webhook targets' keys: an event whose delivery to one is not written yet shows it pending. */
  keys?: readonly string[];
  /** The instance's bound on feed reads at once (FEED_READS_IN_FLIGHT); unset: unbounded. */
  limit?: ReadLimiter;
}

export interface FeedRequest extends FeedFilter {
  after?: string | undefined;
  limit: number;
  waitS: number;
  /** Aborted when nobody awaits the page any more (its client closed the connection). */
  abandoned?: AbortSignal | undefined;
}

/** One page of the feed; with waitS, held while nothing is newer than `after`. */
export async function readFeedPage(deps: FeedDeps, q: FeedRequest): Promise<{ items: EventView[]; nextCursor: string | null }> {
  const after = q.after === undefined ? undefined : feedCursor.decode(q.after);
  const filter = { type: q.type, customerUuid: q.customerUuid };
  const bound = deps.limit;
  const limit: ReadLimiter['run'] = bound ? (read, options) => bound.run(read, options) : (read) => read();
  const signal = q.abandoned;
  let reads = 0;
  let rows: EventRow[];
  try {
    rows = await deps.waitAny(q.waitS, {
      // Only the first read is one its client waits on now; the others are a waiting long-poll's.
      read: () => limit(() => readFeed(deps.db, filter, after, q.limit, deps.keys), { kind: reads++ === 0 ? 'first' : 'again', signal }),
      ready: (page) => page.length > 0,
      onWaiting: (delta) => deps.onWaiting?.(delta),
      // Committed events an older writer still holds back send no notification once readable.
      recheckMs: async () => ((await limit(() => feedHeldBack(deps.db, filter, after), { kind: 'again', signal })) ? HELD_BACK_RECHECK_MS : undefined),
      minReadIntervalMs: MIN_REREAD_MS,
      abandoned: signal,
    });
  } catch (err) {
    // Its client closed the connection while its read was queued: the read was dropped, nobody reads the page.
    if (signal?.aborted && err === signal.reason) return { items: [], nextCursor: q.after ?? null };
    throw err;
  }
  const last = rows.at(-1);
  return { items: rows.map(eventView), nextCursor: last ? feedCursor.encode({ tx: last.tx_id, id: last.id }) : (q.after ?? null) };
}
