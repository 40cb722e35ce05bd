import type { Kysely } from 'kysely';
import type { Tables } from '../db/types.js';
import type { NotificationChannel } from '../channels/channel.js';
import { feedCursor } from '../http/cursor.js';
import type { EventView } from './schemas.js';
import { type EventRow, type FeedFilter, feedHeldBack, readFeed } from './feed-sql.js';

/** Committed events not yet readable (an older transaction still runs) are looked for this often. */
const HELD_BACK_RECHECK_MS = 25;
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
  const rows = await deps.waitAny(q.waitS, {
    read: () => readFeed(deps.db, filter, after, q.limit, deps.keys),
    ready: (page) => page.length > 0,
    onWaiting: (delta) => deps.onWaiting?.(delta),
    // Committed events an older writer still holds back send no notification once readable.
    recheckMs: async () => ((await feedHeldBack(deps.db, filter, after)) ? HELD_BACK_RECHECK_MS : undefined),
    minReadIntervalMs: MIN_REREAD_MS,
    abandoned: q.abandoned,
  });
  const last = rows.at(-1);
  return { items: rows.map(eventView), nextCursor: last ? feedCursor.encode({ tx: last.tx_id, id: last.id }) : (q.after ?? null) };
}
