// The event feed's reads (GET /v1/events, one event), below the horizon that keeps paging gap-free.
import { type Kysely, sql } from 'kysely';
import { inIndexOrder } from '../db/plan-guards.js';
import { runStatement } from '../db/run-statement.js';
import { defineStatement, type SqlSnapshot } from '../db/statements.js';
import type { DeliveryStatus, EventType, Tables } from '../db/types.js';
import type { FeedPosition } from '../http/cursor.js';

export type { FeedPosition };

export interface FeedFilter {
  type?: EventType | undefined;
  customerUuid?: string | undefined;
}

export interface DeliveryRow {
  url: string;
  status: DeliveryStatus;
  attempts: number;
  last_attempt_at: Date | null;
  last_status: number | null;
  last_error: string | null;
}

export interface EventRow {
  id: number;
  public_id: string;
  type: EventType;
  created_at: Date;
  tx_id: string;
  data: Record<string, unknown>;
  deliveries: DeliveryRow[] | null;
}

/**
 * Whether the endpoint (an event_endpoints row aliased `p`, null when its row is not written yet)
 * receives the event (an events row aliased `e`): its types filter. What is not written yet for an
 * endpoint (it is paused, or the worker has not dispatched it) is only what it will receive.
 */
export const receivesSql = (p: string, e: string) => sql.raw(`(${p}.types is null or ${e}.type = any(${p}.types))`);

/**
 * An event's deliveries (of an `events` row aliased `e`): those written, then one pending for
 * each configured target whose delivery is not written yet (the event is past the target's
 * dispatch position: the worker writes it shortly).
 */
function deliveriesSql(keys: readonly string[]) {
  return sql<DeliveryRow[]>`(
  select jsonb_agg(x.delivery order by x.written desc, x.ord)
  from (
    select true as written, d.id as ord, jsonb_build_object(
             'url', d.url, 'status', d.status, 'attempts', d.attempts,
             'last_attempt_at', d.last_attempt_at, 'last_status', d.last_status, 'last_error', d.last_error) as delivery
    from event_deliveries d where d.event_id = e.id
    union all
    select false, array_position(${keys}::text[], c.url_key), jsonb_build_object(
             'url', c.url, 'status', 'pending', 'attempts', 0,
             'last_attempt_at', null, 'last_status', null, 'last_error', null)
    from event_dispatch c left join event_endpoints p on p.key = c.url_key
    where c.url_key = any(${keys}::text[]) and (c.tx_id, c.event_id) < (e.tx_id, e.id)
      and ${receivesSql('p', 'e')}
      and not exists (select 1 from event_deliveries d where d.event_id = e.id and d.url_key = c.url_key)
  ) x)`;
}

/**
 * The feed's horizon: an xid8 below which no event can still be committed. It is the oldest of
 * the transactions still running (this statement's snapshot) that write events (found by their
 * lock on the events table) or whose lock cannot be seen yet (a transaction id is in the snapshot
 * an instant before its lock is in pg_locks); with none, the next id to be assigned. Transactions
 * elsewhere in the cluster (another database, a long report) do not hold it back. Events are only
 * ever written by single statements, which lock the table before they are given a transaction
 * id, so a writer not running yet gets an id above the horizon. Read in its own statement, BEFORE
 * the page's snapshot: a writer that commits in between is then visible to the page. (pg_locks
 * is read twice, at two instants: a writer can commit, and its backend start the next one,
 * between them, and then seem to write no events. In its own statement that writer has
 * committed before the page's snapshot is taken; in the page's own statement it would not be.)
 */
const HORIZON = defineStatement('feed_horizon', `
  with s as materialized (select pg_current_snapshot() as snap),
  running as (
    select x.transactionid::text::bigint as xid32, bool_or(r.pid is not null) as writes_events
    from pg_locks x
    left join pg_locks r
      on r.virtualtransaction = x.virtualtransaction and r.locktype = 'relation'
     and r.relation = 'events'::regclass and r.mode = 'RowExclusiveLock'
     and r.database = (select oid from pg_database where datname = current_database())
    where x.locktype = 'transactionid' and x.mode = 'ExclusiveLock' and x.granted
    group by 1
  )
  select least(
    pg_snapshot_xmax(s.snap)::text::bigint,
    (select min(p::text::bigint) from pg_snapshot_xip(s.snap) as p
       left join running l on l.xid32 = (p::text::bigint & 4294967295)
      where l.xid32 is null or l.writes_events)
  )::text as horizon
  from s`);

export async function feedHorizon(db: Kysely<Tables>): Promise<string> {
  const rows = await runStatement<{ horizon: string }>(db, HORIZON, []);
  return rows[0]!.horizon;
}

/**
 * One page of the feed, oldest first by (tx_id, id), strictly after `after`, below the horizon:
 * an event committed late by a transaction that began early still sorts before everything read
 * after it, so paging never skips it (no gaps) and never reads anything twice (no duplicates).
 */
export async function readFeed(
  db: Kysely<Tables>,
  filter: FeedFilter,
  after: FeedPosition | undefined,
  limit: number,
  keys: readonly string[] = [],
): Promise<EventRow[]> {
  const horizon = await feedHorizon(db);
  const read = (q: Kysely<Tables>) => feedQuery(q, filter, after, limit, keys, horizon).execute();
  const rows = feedByType(filter) ? await inIndexOrder(db, read) : await read(db);
  return rows as EventRow[];
}

/**
 * A type filter (without a customer) reads events_type_feed in order: as `= any(array[...])`
 * leading the order, no other index yields it, and with no sort allowed (inIndexOrder) the planner
 * cannot walk events_feed filtering, nor read every event of the type and sort: a page of a rare
 * type behind many events of other types read them all (docs/performance.md).
 */
export function feedByType(filter: FeedFilter): boolean {
  return filter.type !== undefined && filter.customerUuid === undefined;
}

/** readFeed's page below a horizon read beforehand (feedHorizon). */
export function feedQuery(db: Kysely<Tables>, filter: FeedFilter, after: FeedPosition | undefined, limit: number, keys: readonly string[], horizon: string) {
  const byType = feedByType(filter);
  return db
    .selectFrom('events as e')
    .select(['e.id', 'e.public_id', 'e.type', 'e.created_at', sql<string>`e.tx_id::text`.as('tx_id'), 'e.data', deliveriesSql(keys).as('deliveries')])
    .where(sql<boolean>`e.tx_id < ${horizon}::xid8`)
    .$if(after !== undefined, (q) => q.where(sql<boolean>`(e.tx_id, e.id) > (${after!.tx}::xid8, ${after!.id}::bigint)`))
    .$if(filter.type !== undefined, (q) => (byType ? q.where(sql<boolean>`e.type = any(${[filter.type!]}::text[])`) : q.where('e.type', '=', filter.type!)))
    .$if(filter.customerUuid !== undefined, (q) => q.where('e.customer_uuid', '=', filter.customerUuid!))
    .$if(byType, (q) => q.orderBy('e.type'))
    .orderBy(sql`e.tx_id`)
    .orderBy('e.id')
    .limit(limit);
}

/**
 * True when events after `after` are committed but not yet readable, because an older writer is
 * still running: a long-poll then looks again shortly instead of waiting for a notification that
 * the blocking transaction may never send.
 */
export async function feedHeldBack(db: Kysely<Tables>, filter: FeedFilter, after: FeedPosition | undefined): Promise<boolean> {
  const horizon = await feedHorizon(db);
  const row = await db
    .selectFrom('events as e')
    .select('e.id')
    .where(sql<boolean>`e.tx_id >= ${horizon}::xid8`)
    .$if(after !== undefined, (q) => q.where(sql<boolean>`(e.tx_id, e.id) > (${after!.tx}::xid8, ${after!.id}::bigint)`))
    .$if(filter.type !== undefined, (q) => q.where('e.type', '=', filter.type!))
    .$if(filter.customerUuid !== undefined, (q) => q.where('e.customer_uuid', '=', filter.customerUuid!))
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

export async function readEvent(db: Kysely<Tables>, publicId: string, keys: readonly string[] = []): Promise<EventRow | undefined> {
  const row = await db
    .selectFrom('events as e')
    .select(['e.id', 'e.public_id', 'e.type', 'e.created_at', sql<string>`e.tx_id::text`.as('tx_id'), 'e.data', deliveriesSql(keys).as('deliveries')])
    .where('e.public_id', '=', publicId)
    .executeTakeFirst();
  return row as EventRow | undefined;
}


/** The builder queries above as `npm run sql:snapshot` writes them (docs/layout.md). */
export const SQL_SNAPSHOTS: readonly SqlSnapshot[] = [
  { name: 'read_feed', rows: [[{ horizon: '9' }]], run: (db) => readFeed(db, {}, undefined, 50, ['k']) },
  {
    name: 'read_feed_filtered',
    rows: [[{ horizon: '9' }]],
    run: (db) => readFeed(db, { type: 'underwriting.completed', customerUuid: 'c' }, { tx: '5', id: 1 }, 50, ['k']),
  },
  { name: 'feed_held_back', rows: [[{ horizon: '9' }]], run: (db) => feedHeldBack(db, {}, { tx: '5', id: 1 }) },
  { name: 'read_event', run: (db) => readEvent(db, 'evt', ['k']) },
];
