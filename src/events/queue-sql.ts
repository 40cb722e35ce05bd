// The delivery worker's queue: where each endpoint's deliveries start, dispatch (write and lease),
// claim, record what each attempt became, give leases back.
import { type Kysely, sql } from 'kysely';
import { inIndexOrder } from '../db/plan-guards.js';
import { runStatement } from '../db/run-statement.js';
import { defineStatement, type SqlSnapshot } from '../db/statements.js';
import type { DeliveryStatus, Tables } from '../db/types.js';
import { feedHorizon } from './feed-sql.js';
import { eventBodySql, targetParameters } from './record.js';
import type { WebhookTarget } from './targets.js';

/**
 * Where each configured URL's deliveries start: at the feed's horizon when it is first configured
 * (what was recorded before is not pushed to it); a position already kept stays (nothing recorded
 * meanwhile is lost, even while no instance pushed to it). Not for API endpoints: insertEndpoint
 * starts theirs with their row and deleteEndpoint deletes it with their row, so that a delete is
 * never undone by an instance whose read of the endpoints predates it.
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
  /**
   * The URL the attempt went to, as shown: a row this attempt ends (delivered or dead) keeps it, for
   * a PATCH of the url mid-attempt rewrote the pending row's; a row still pending keeps the one it goes to next.
   */
  url?: string;
}

const RECORD_FINISHED_ATTEMPTS = defineStatement('record_event_delivery_outcomes', `
    update event_deliveries d
    -- A delivery ended dead while its attempt was in flight (its endpoint deleted: it kept its
    -- lease) becomes delivered if the receiver took it, and stays dead, saying why, otherwise.
    set status = case when d.status = 'dead' and o.status <> 'delivered' then d.status else o.status end,
        attempts = d.attempts + 1, last_attempt_at = o.at, last_status = o.http_status,
        last_error = case when d.status = 'dead' and o.status <> 'delivered' then d.last_error else o.error end,
        next_attempt_at = coalesce(o.next_at, d.next_attempt_at),
        delivered_at = case when o.status = 'delivered' then o.at end, lease_until = null, lease_token = null,
        url = case when o.status <> 'pending' or d.status = 'dead' then coalesce(o.url, d.url) else d.url end
    from json_to_recordset($1::json) as o(id bigint, token text, status text, at timestamptz, http_status int, error text, next_at timestamptz, url text)
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
      url: a.url ?? null,
    })),
  );
  await runStatement(db, RECORD_FINISHED_ATTEMPTS, [json]);
}

/**
 * Renews the leases of deliveries about to be attempted: each lease runs `leaseS` from `now` again,
 * if the delivery is still leased under the same token (not taken over by another instance after
 * its lease ran out, not requeued). The ids renewed.
 */
const RENEW_LEASES = defineStatement('renew_event_delivery_leases', `
    update event_deliveries d
    set lease_until = $1::timestamptz + make_interval(secs => $2::double precision)
    from unnest($3::bigint[], $4::text[]) as l(id, token)
    where d.id = l.id and d.lease_token = l.token and d.status = 'pending'
    returning d.id`);

export async function renewLeases(db: Kysely<Tables>, renew: { now: Date; leaseS: number; leases: readonly { id: number; token: string }[] }): Promise<number[]> {
  const rows = await runStatement<{ id: number | string }>(db, RENEW_LEASES, [
    renew.now,
    renew.leaseS,
    renew.leases.map((l) => l.id),
    renew.leases.map((l) => l.token),
  ]);
  return rows.map((r) => Number(r.id));
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

const AT = new Date('2026-01-01T00:00:00Z');
const TARGET = { key: 'k', shown: 'https://receiver.example/hook', types: ['underwriting.completed'] };

/** The builder queries above as `npm run sql:snapshot` writes them (docs/layout.md). */
export const SQL_SNAPSHOTS: readonly SqlSnapshot[] = [
  { name: 'start_dispatch', rows: [[{ horizon: '9' }]], run: (db) => startDispatch(db, [TARGET], AT) },
  { name: 'claim_in_index_order', run: (db) => claimDeliveries(db, { now: AT, keys: ['k'], limit: 10, leaseS: 30, token: 't' }) },
  { name: 'release_deliveries', run: (db) => releaseDeliveries(db, [1], 't') },
];
