import { type Kysely, sql } from 'kysely';
import { runStatement } from '../db/run-statement.js';
import { defineStatement } from '../db/statements.js';
import { inIndexOrder } from '../db/plan-guards.js';
import type { SqlSnapshot } from '../db/statements.js';
import type { DeliveryStatus, EventType, Tables } from '../db/types.js';
import type { FeedPosition } from '../http/cursor.js';
import { eventBodySql, isoSql, recordEventsSql, targetParameters } from './record.js';
import type { WebhookTarget } from './targets.js';

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
const receivesSql = (p: string, e: string) => sql.raw(`(${p}.types is null or ${e}.type = any(${p}.types))`);

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

const REQUEUE = `status = 'pending', attempts = 0, queued_at = excluded.queued_at,
  next_attempt_at = excluded.next_attempt_at, lease_until = null, lease_token = null, delivered_at = null`;

/** Queues one event again for every target that receives its type (delivered or not); undefined when there is no such event. */
export async function redeliverEvent(
  db: Kysely<Tables>,
  publicId: string,
  targets: readonly (Pick<WebhookTarget, 'key' | 'shown'> & { types?: readonly string[] | null })[],
  now: Date,
): Promise<number | undefined> {
  const [keys, shown] = targetParameters(targets);
  const types = targets.map((t) => (t.types ? t.types.join(',') : null));
  const { rows } = await sql<{ found: number; queued: number }>`
    with e as (select id, customer_uuid, type from events where public_id = ${publicId}),
    queued as (
      insert into event_deliveries (event_id, customer_uuid, url_key, url, queued_at, next_attempt_at)
      select e.id, e.customer_uuid, t.key, t.shown, ${now}, ${now}
      from e cross join unnest(${keys}::text[], ${shown}::text[], ${types}::text[]) as t(key, shown, types)
      where t.types is null or e.type = any(string_to_array(t.types, ','))
      on conflict (event_id, url_key) do update set url = excluded.url, ${sql.raw(REQUEUE)}
      returning 1
    )
    select (select count(*) from e)::int as found, (select count(*) from queued)::int as queued`.execute(db);
  const row = rows[0]!;
  return Number(row.found) === 0 ? undefined : Number(row.queued);
}

/** Which deliveries a bulk redelivery queues again: of one status, of events in [since, until), maybe of one type. */
export interface BulkRedelivery {
  status: 'dead' | 'delivered';
  since?: string | undefined;
  until?: string | undefined;
  type?: EventType | undefined;
}

/**
 * Queues again, due now with a fresh horizon, every delivery of the given status to one of the
 * targets (every endpoint this instance sends to, or the one asked for), of events created in
 * [since, until) and of the type asked for, among the types each target receives.
 */
export async function redeliverDeliveries(
  db: Kysely<Tables>,
  which: BulkRedelivery,
  targets: readonly (Pick<WebhookTarget, 'key'> & { types?: readonly string[] | null })[],
  now: Date,
): Promise<number> {
  const { rows } = await redeliverQuery(which, targets, now).execute(db);
  return Number(rows[0]?.n ?? 0);
}

/** The statement of redeliverDeliveries: one row, n queued. */
export function redeliverQuery(
  which: BulkRedelivery,
  targets: readonly (Pick<WebhookTarget, 'key'> & { types?: readonly string[] | null })[],
  now: Date,
) {
  const keys = targets.map((t) => t.key);
  const types = targets.map((t) => (t.types ? t.types.join(',') : null));
  return sql<{ n: number }>`
    with queued as (
      update event_deliveries d
      set status = 'pending', attempts = 0, queued_at = ${now}, next_attempt_at = ${now}, lease_until = null, lease_token = null,
          delivered_at = null
      from events e, unnest(${keys}::text[], ${types}::text[]) as t(key, types)
      where e.id = d.event_id and d.status = ${which.status} and d.url_key = t.key
        and (t.types is null or e.type = any(string_to_array(t.types, ',')))
        ${which.type === undefined ? sql`` : sql`and e.type = ${which.type}`}
        ${which.since === undefined ? sql`` : sql`and e.created_at >= ${which.since}::timestamptz`}
        ${which.until === undefined ? sql`` : sql`and e.created_at < ${which.until}::timestamptz`}
      returning 1
    )
    select count(*)::int as n from queued`;
}

/**
 * Where each target's deliveries start: at the feed's horizon when it is first configured (what
 * was recorded before is not pushed to it); a position already kept stays (nothing recorded
 * meanwhile is lost, even while no instance pushed to it).
 */
export async function startDispatch(db: Kysely<Tables>, targets: readonly Pick<WebhookTarget, 'key' | 'shown'>[], now: Date): Promise<void> {
  const [keys, shown] = targetParameters(targets);
  const horizon = await feedHorizon(db);
  await sql`
    insert into event_dispatch (url_key, url, tx_id, event_id, updated_at)
    select t.key, t.shown, ${horizon}::xid8, 0, ${now} from unnest(${keys}::text[], ${shown}::text[]) as t(key, shown)
    on conflict (url_key) do nothing`.execute(db);
}

/** A delivery written by a dispatch: leased to this worker with what it sends, or held (no token). */
export interface DispatchedDelivery {
  id: number;
  url_key: string;
  customer_uuid: string;
  lease_token: string | null;
  public_id: string;
  created_at: Date;
  body: string;
  /** The event's origin: the trace each attempt continues, the X-Request-Id it carries. */
  traceparent: string | null;
  x_request_id: string | null;
}

/**
 * Writes the deliveries of the next events past each target's position (at most `limit` events
 * a target, in feed order, below the feed's horizon: none is ever skipped), moves the position,
 * and leases them to this worker, but for a customer with an earlier delivery to the same target
 * still pending (or earlier in this batch): that one is held, and claimed once the earlier one is
 * done. A position another instance is moving is skipped (SKIP LOCKED): one writes each event's
 * deliveries. `full`: some target had `limit` events to write (there may be more).
 * The horizon ($7) is read in its own statement before this one, as the feed reads it (see
 * HORIZON): within one statement a writer could commit, and its backend start the next batch,
 * between the two reads of pg_locks, so that it seemed to write no events while its events were
 * not yet in the statement's snapshot (seen: 3 to 13 of 4,000 events passed over at 500/s).
 * An endpoint's types filter ($8: comma lists, null for all) leaves the other events unwritten
 * for it (its position moves past them all the same). Written deliveries are queued now: a held
 * one's retry horizon starts at its first attempt (see CLAIM_DELIVERIES).
 * $1 keys, $2 shown URLs, $3 limit, $4 token, $5 lease end, $6 now, $7 horizon, $8 types.
 */
export const DISPATCH_DELIVERIES = defineStatement('dispatch_event_deliveries', `
    with locked as (
      select d.url_key, d.tx_id, d.event_id from event_dispatch d
      where d.url_key = any($1::text[])
      for update skip locked
    ),
    -- A position another instance moved after this statement's snapshot is left alone this time:
    -- the deliveries it just wrote are not visible here, so the order rule could not see them.
    c as (
      select l.* from locked l
      join event_dispatch v on v.url_key = l.url_key and v.tx_id = l.tx_id and v.event_id = l.event_id
    ),
    picked as (
      select c.url_key, p.id, p.customer_uuid, p.created_at, p.tx_id
      from c join unnest($1::text[], $8::text[]) as f(key, types) on f.key = c.url_key
      cross join lateral (
        select e.id, e.customer_uuid, e.created_at, e.tx_id from events e
        where (e.tx_id, e.id) > (c.tx_id, c.event_id) and e.tx_id < $7::xid8
          and (f.types is null or e.type = any(string_to_array(f.types, ',')))
        order by e.tx_id, e.id
        limit $3
      ) p
    ),
    numbered as (
      select p.*, row_number() over (partition by p.url_key, p.customer_uuid order by p.id) as nth from picked p
    ),
    inserted as (
      insert into event_deliveries (event_id, customer_uuid, url_key, url, queued_at, next_attempt_at, lease_until, lease_token)
      select n.id, n.customer_uuid, n.url_key, t.shown, $6::timestamptz, n.created_at,
             case when l.leased then $5::timestamptz end, case when l.leased then $4::text end
      from numbered n
      join unnest($1::text[], $2::text[]) as t(key, shown) on t.key = n.url_key
      cross join lateral (
        select n.nth = 1 and not exists (
          select 1 from event_deliveries p
          where p.status = 'pending' and p.url_key = n.url_key and p.customer_uuid = n.customer_uuid) as leased
      ) l
      order by n.url_key, n.tx_id, n.id
      on conflict (event_id, url_key) do nothing
      returning id, event_id, url_key, customer_uuid, lease_token
    ),
    counts as (select p.url_key, count(*) as n from picked p group by p.url_key),
    last as (
      select distinct on (p.url_key) p.url_key, p.tx_id, p.id from picked p order by p.url_key, p.tx_id desc, p.id desc
    ),
    moved as (
      update event_dispatch d
      -- Fewer than the limit: every event below the horizon is written.
      set tx_id = case when coalesce(k.n, 0) < $3 then $7::xid8 else l.tx_id end,
          event_id = case when coalesce(k.n, 0) < $3 then 0 else l.id end,
          updated_at = $6::timestamptz
      from c left join counts k on k.url_key = c.url_key left join last l on l.url_key = c.url_key
      where d.url_key = c.url_key
        and (case when coalesce(k.n, 0) < $3 then $7::xid8 else l.tx_id end,
             case when coalesce(k.n, 0) < $3 then 0 else l.id end) > (d.tx_id, d.event_id)
    )
    select f.full, x.id, x.url_key, x.customer_uuid, x.lease_token, e.public_id, e.created_at, ${eventBodySql('e')} as body,
           e.traceparent, e.x_request_id
    from (select coalesce(max(k.n), 0) >= $3 as full from counts k) f
    left join (inserted x join events e on e.id = x.event_id) on true`);

export async function dispatchDeliveries(
  db: Kysely<Tables>,
  dispatch: {
    now: Date;
    targets: readonly (Pick<WebhookTarget, 'key' | 'shown'> & { types?: readonly string[] | null })[];
    limit: number;
    leaseS: number;
    token: string;
  },
): Promise<{ full: boolean; deliveries: DispatchedDelivery[] }> {
  const [keys, shown] = targetParameters(dispatch.targets);
  const horizon = await feedHorizon(db);
  const until = new Date(dispatch.now.getTime() + dispatch.leaseS * 1000);
  const rows = await runStatement<DispatchedDelivery & { full: boolean; id: number | null }>(db, DISPATCH_DELIVERIES, [
    keys,
    shown,
    dispatch.limit,
    dispatch.token,
    until,
    dispatch.now,
    horizon,
    dispatch.targets.map((t) => (t.types ? t.types.join(',') : null)),
  ]);
  return { full: rows[0]?.full === true, deliveries: rows.filter((r) => r.id !== null) };
}

/** A delivery leased to this worker, with what it sends. */
export interface ClaimedDelivery {
  id: number;
  url_key: string;
  customer_uuid: string;
  attempts: number;
  queued_at: Date;
  public_id: string;
  created_at: Date;
  /** The event as every attempt sends it (built by the same SQL as a leased delivery's). */
  body: string;
  traceparent: string | null;
  x_request_id: string | null;
}

/**
 * Leases due deliveries: pending, due, not leased (or the lease ran out: its holder died), to a
 * configured target, and with no earlier pending delivery of the same customer to the same URL
 * (a later event waits until the earlier one is delivered or dead). SKIP LOCKED lets any number
 * of instances claim at once without waiting for, or taking, each other's rows.
 */
export const CLAIM_DELIVERIES = defineStatement('claim_event_deliveries', `
    with due as (
      select d.id from event_deliveries d
      where d.status = 'pending' and d.next_attempt_at <= $1::timestamptz
        and (d.lease_until is null or d.lease_until <= $1::timestamptz)
        -- Written so that the plan walks event_deliveries_due in order and stops at the limit,
        -- even on statistics from before a backlog: "url_key = any(...)" and "not exists" would
        -- let the planner read every pending delivery by event_deliveries_order (an index
        -- condition, a merge anti join) and sort them all: a claim in proportion to the backlog.
        and array_position($2::text[], d.url_key) is not null
        and (select p.id from event_deliveries p
             where p.status = 'pending' and p.url_key = d.url_key and p.customer_uuid = d.customer_uuid
               and p.event_id < d.event_id
             limit 1) is null
      order by d.next_attempt_at, d.id
      limit $3
      for update skip locked
    )
    update event_deliveries d
    set lease_until = $1::timestamptz + make_interval(secs => $4::double precision), lease_token = $5,
        -- Its first attempt: eligible now (it may have waited behind a customer's earlier event),
        -- so its retry horizon counts from here.
        queued_at = case when d.attempts = 0 then greatest(d.queued_at, $1::timestamptz) else d.queued_at end
    from due, events e
    where d.id = due.id and e.id = d.event_id
    returning d.id, d.url_key, d.customer_uuid, d.attempts, d.queued_at, e.public_id, e.created_at, ${eventBodySql('e')} as body,
              e.traceparent, e.x_request_id`);


export async function claimDeliveries(
  db: Kysely<Tables>,
  claim: { now: Date; keys: readonly string[]; limit: number; leaseS: number; token: string },
): Promise<ClaimedDelivery[]> {
  // In its own transaction, in index order: the ordered walk of event_deliveries_due that stops at
  // the limit is the only plan, whatever the statistics guess of the backlog (docs/performance.md).
  return inIndexOrder(db, (trx) =>
    runStatement<ClaimedDelivery>(trx, CLAIM_DELIVERIES, [claim.now, claim.keys, claim.limit, claim.leaseS, claim.token]),
  );
}

/** One finished delivery attempt: what its delivery row becomes. */
export interface FinishedAttempt {
  id: number;
  token: string;
  status: DeliveryStatus;
  at: Date;
  httpStatus: number | null;
  error: string | null;
  /** When to try again (pending only). */
  nextAt: Date | null;
}

const RECORD_FINISHED_ATTEMPTS = defineStatement('record_event_delivery_outcomes', `
    update event_deliveries d
    set status = o.status, attempts = d.attempts + 1, last_attempt_at = o.at, last_status = o.http_status,
        last_error = o.error, next_attempt_at = coalesce(o.next_at, d.next_attempt_at),
        delivered_at = case when o.status = 'delivered' then o.at end, lease_until = null, lease_token = null
    from json_to_recordset($1::json) as o(id bigint, token text, status text, at timestamptz, http_status int, error text, next_at timestamptz)
    where d.id = o.id and d.lease_token = o.token`);

/** Writes finished attempts in one statement; one whose lease was taken over (or requeued) is ignored. */
export async function recordFinishedAttempts(db: Kysely<Tables>, attempts: readonly FinishedAttempt[]): Promise<void> {
  const json = JSON.stringify(
    attempts.map((a) => ({
      id: a.id,
      token: a.token,
      status: a.status,
      at: a.at.toISOString(),
      http_status: a.httpStatus,
      error: a.error,
      next_at: a.nextAt?.toISOString() ?? null,
    })),
  );
  await runStatement(db, RECORD_FINISHED_ATTEMPTS, [json]);
}

/**
 * One row (n, oldest): the configured targets' deliveries not written yet (events past a
 * target's dispatch position), and the time of the oldest such event.
 */
export function unwrittenDeliveriesSql(keys: readonly string[]) {
  return sql`
    select (select count(*) from event_dispatch c left join event_endpoints p on p.key = c.url_key
              join events e on (e.tx_id, e.id) > (c.tx_id, c.event_id) and ${receivesSql('p', 'e')}
             where c.url_key = any(${keys}::text[])) as n,
           (select min(f.created_at) from event_dispatch c left join event_endpoints p on p.key = c.url_key
              cross join lateral (select e.created_at from events e where (e.tx_id, e.id) > (c.tx_id, c.event_id) and ${receivesSql('p', 'e')}
                                   order by e.tx_id, e.id limit 1) f
             where c.url_key = any(${keys}::text[])) as oldest`;
}

/** The pending deliveries not written yet of one endpoint per row (c: event_dispatch, for deliveriesByUrlQuery). */
export function unwrittenByUrlSql(keys: readonly string[]) {
  return sql`
    select c.url, 'pending' as status from event_dispatch c left join event_endpoints p on p.key = c.url_key
      join events e on (e.tx_id, e.id) > (c.tx_id, c.event_id) and ${receivesSql('p', 'e')}
     where c.url_key = any(${keys}::text[])`;
}

/**
 * Pending deliveries: those written, and those of the configured targets not written yet; the
 * oldest by when it was queued (its event's time).
 */
export async function pendingSummary(db: Kysely<Tables>, keys: readonly string[] = []): Promise<{ pending: number; oldest: Date | null }> {
  const { rows } = await sql<{ n: string; oldest: Date | null }>`
    with written as (
      select count(*) as n, min(d.queued_at) as oldest from event_deliveries d where d.status = 'pending'
    ),
    unwritten as (${unwrittenDeliveriesSql(keys)})
    select (w.n + u.n)::text as n, least(w.oldest, u.oldest) as oldest from written w, unwritten u`.execute(db);
  const row = rows[0]!;
  return { pending: Number(row.n), oldest: row.oldest ? new Date(row.oldest) : null };
}

/** Gives leased deliveries back unattempted (their endpoint is no longer active): due again at once. */
export async function releaseDeliveries(db: Kysely<Tables>, ids: readonly number[], token: string): Promise<void> {
  await db
    .updateTable('event_deliveries')
    .set({ lease_until: null, lease_token: null })
    .where('id', 'in', ids)
    .where('lease_token', '=', token)
    .execute();
}

/** Since when an endpoint has failed every attempt (kept when already failing), or null after a 2xx. */
export async function recordEndpointFailing(db: Kysely<Tables>, key: string, since: Date | null): Promise<void> {
  await db
    .updateTable('event_endpoints')
    .set(since === null ? { failing_since: null } : { failing_since: sql<Date>`coalesce(failing_since, ${since}::timestamptz)` })
    .where('key', '=', key)
    .$if(since === null, (q) => q.where('failing_since', 'is not', null))
    .execute();
}

/**
 * Disables an active endpoint that has failed every attempt for afterS, and records its
 * endpoint.disabled event in the same statement (an instance that loses the race to it changes
 * and records nothing). True when this call disabled it.
 */
export async function disableFailingEndpoint(
  db: Kysely<Tables>,
  d: { key: string; at: Date; afterS: number; lastError: string },
): Promise<boolean> {
  const { rows } = await sql<{ n: number }>`
    with disabled as (
      update event_endpoints
      set status = 'disabled', updated_at = ${d.at}::timestamptz,
          disabled_reason = 'every attempt failed since ' || ${sql.raw(isoSql('failing_since'))} || '; last: ' || ${d.lastError}::text
      where key = ${d.key} and status = 'active' and failing_since is not null
        and failing_since <= ${d.at}::timestamptz - make_interval(secs => ${d.afterS}::double precision)
      returning id, shown_url, disabled_reason, failing_since
    ),
    source as (
      select 'endpoint.disabled'::text as type, x.id as customer_uuid, ${d.at}::timestamptz as created_at,
             null::bigint as request_id, null::bigint as callback_id,
             jsonb_build_object('endpointId', x.id, 'url', x.shown_url, 'disabledReason', x.disabled_reason,
                                'failingSince', ${sql.raw(isoSql('x.failing_since'))}) as data
      from disabled x
    ),
    ${sql.raw(recordEventsSql('source'))}
    select count(*)::int as n from new_events`.execute(db);
  return Number(rows[0]?.n ?? 0) > 0;
}

/**
 * Reserves up to `want` attempt slots of an endpoint's rate in the second `window` (Unix seconds),
 * across every instance: the number granted (0 when that second's are taken).
 */
export async function reserveRateSlots(db: Kysely<Tables>, key: string, window: number, want: number, limit: number): Promise<number> {
  const { rows } = await sql<{ granted: number }>`
    with cur as (
      select key, case when rate_window = ${window}::bigint then rate_used else 0 end as used
      from event_endpoints where key = ${key} for update
    ),
    g as (select cur.key, cur.used, least(${want}::int, greatest(0, ${limit}::int - cur.used)) as granted from cur),
    u as (
      update event_endpoints e set rate_window = ${window}::bigint, rate_used = g.used + g.granted
      from g where e.key = g.key
      returning g.granted
    )
    select granted from u`.execute(db);
  return Number(rows[0]?.granted ?? 0);
}

/**
 * Reserves up to `want` of an endpoint's max_in_flight slots for `holder` (one delivery worker),
 * across every instance: in the endpoint's row, under its lock, as the rate's slots are. Holders'
 * entries past their `until` (their instance died without giving them back) count no more and are
 * dropped. Idempotent: the holder's entry is written as the absolute count it holds, `held` (what
 * the worker knows it holds) plus those granted, whatever the row said of it, so that a reservation
 * that committed without the worker learning it is undone by its next write. Its `until` is the
 * database's now() plus `ttlS`. The row is not written when nothing changes (nothing granted,
 * nothing expired, its entry already `held`). The number granted (0 when all are held).
 */
export async function reserveInFlightSlots(
  db: Kysely<Tables>,
  s: { key: string; holder: string; held: number; want: number; limit: number; ttlS: number },
): Promise<number> {
  const { rows } = await sql<{ granted: number }>`
    with cur as (
      select key, in_flight from event_endpoints where key = ${s.key} for update
    ),
    held as (
      select cur.key,
             coalesce((cur.in_flight -> ${s.holder}::text ->> 'n')::int, 0) as mine,
             coalesce(sum((x.v ->> 'n')::int) filter (where (x.v ->> 'until')::timestamptz > now()), 0) as others,
             count(x.h) filter (where (x.v ->> 'until')::timestamptz <= now()) as expired,
             coalesce(jsonb_object_agg(x.h, x.v) filter (where (x.v ->> 'until')::timestamptz > now()), '{}'::jsonb) as kept
      from cur
      left join lateral jsonb_each(cur.in_flight) as x(h, v) on x.h <> ${s.holder}::text
      group by cur.key, cur.in_flight
    ),
    g as (select held.*, least(${s.want}::int, greatest(0, ${s.limit}::int - held.others - ${s.held}::int)) as granted from held),
    u as (
      update event_endpoints e
      set in_flight = case when ${s.held}::int + g.granted = 0 then g.kept
                           else g.kept || jsonb_build_object(${s.holder}::text, jsonb_build_object(
                                  'n', ${s.held}::int + g.granted, 'until', now() + make_interval(secs => ${s.ttlS}::float8))) end
      from g
      where e.key = g.key and (g.granted > 0 or g.expired > 0 or g.mine <> ${s.held}::int)
    )
    select granted from g`.execute(db);
  return Number(rows[0]?.granted ?? 0);
}

/**
 * Writes the holder's in-flight slots of one endpoint as the absolute count `held` it now holds
 * (its entry removed at 0), so that a write repeated or lost is made good by the next; with no key,
 * removes its entries of every endpoint (at shutdown).
 */
export async function releaseInFlightSlots(db: Kysely<Tables>, s: { key?: string; holder: string; held?: number; ttlS: number }): Promise<void> {
  const held = s.key === undefined ? 0 : (s.held ?? 0);
  await sql`
    update event_endpoints
    set in_flight = case when ${held}::int <= 0 then in_flight - ${s.holder}::text
                         else in_flight || jsonb_build_object(${s.holder}::text, jsonb_build_object(
                                'n', ${held}::int, 'until', now() + make_interval(secs => ${s.ttlS}::float8))) end
    where ${s.key === undefined ? sql`in_flight -> ${s.holder}::text is not null` : sql`key = ${s.key}`}`.execute(db);
}

const AT = new Date('2026-01-01T00:00:00Z');
const TARGET = { key: 'k', shown: 'https://receiver.example/hook', types: ['underwriting.completed'] };

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
  { name: 'redeliver_event', rows: [[{ found: 1, queued: 1 }]], run: (db) => redeliverEvent(db, 'evt', [TARGET], AT) },
  { name: 'redeliver_dead', run: (db) => redeliverDeliveries(db, { status: 'dead', since: '2026-01-01T00:00:00Z', until: '2026-01-02T00:00:00Z' }, [TARGET], AT) },
  { name: 'redeliver_by_type', run: (db) => redeliverDeliveries(db, { status: 'delivered', type: 'underwriting.completed' }, [TARGET], AT) },
  { name: 'start_dispatch', rows: [[{ horizon: '9' }]], run: (db) => startDispatch(db, [TARGET], AT) },
  { name: 'claim_in_index_order', run: (db) => claimDeliveries(db, { now: AT, keys: ['k'], limit: 10, leaseS: 30, token: 't' }) },
  { name: 'pending_summary', rows: [[{ n: '0', oldest: null }]], run: (db) => pendingSummary(db, ['k']) },
  { name: 'release_deliveries', run: (db) => releaseDeliveries(db, [1], 't') },
  { name: 'record_endpoint_failing', run: (db) => recordEndpointFailing(db, 'k', AT) },
  { name: 'record_endpoint_recovered', run: (db) => recordEndpointFailing(db, 'k', null) },
  { name: 'disable_failing_endpoint', run: (db) => disableFailingEndpoint(db, { key: 'k', at: AT, afterS: 60, lastError: 'e' }) },
  { name: 'reserve_rate_slots', run: (db) => reserveRateSlots(db, 'k', 1, 5, 10) },
  { name: 'reserve_in_flight_slots', run: (db) => reserveInFlightSlots(db, { key: 'k', holder: 'h', held: 1, want: 2, limit: 3, ttlS: 7 }) },
  { name: 'release_in_flight_slots', run: (db) => releaseInFlightSlots(db, { key: 'k', holder: 'h', held: 1, ttlS: 7 }) },
];
