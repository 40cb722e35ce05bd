import { type Kysely, type RawBuilder, sql } from 'kysely';
import { INDEX_LOOKUPS_ONLY, INDEX_SCANS_ONLY } from '../db/plan-guards.js';
import type { SqlSnapshot } from '../db/statements.js';
import type { Tables } from '../db/types.js';
import { ORIGIN, turnaroundBin } from './turnaround.js';

// The closing pass's SQL (closing.ts): the hours it may close, and one hour closed.

const HOUR_MS = 3600_000;

/**
 * The lock that orders a closing against whatever adjusts a closed hour: the pass takes it
 * exclusively; the triggers of migration 0022 (which hold the same number) and retention's batches
 * take it shared, before they touch statistics_hourly.
 */
export const CLOSING_LOCK_ID = 4127708853940019163n;

/** Taken by a transaction that folds into, or deletes rows of, hours that may be closed (retention). */
export const SHARE_CLOSING_LOCK = sql`select pg_advisory_xact_lock_shared(${sql.lit(CLOSING_LOCK_ID)})`;
const TAKE_CLOSING_LOCK = sql`select pg_advisory_xact_lock(${sql.lit(CLOSING_LOCK_ID)})`;

/**
 * A row (closed_at null) for every hour from the last one known, or else from the oldest live
 * request or stray callback, up to the horizon: the hours a pass may close, empty ones included,
 * so that the read finds the closed past as one run of rows.
 */
export function addHoursQuery(horizon: Date) {
  const hourOf = (column: string) => sql`date_bin(interval '1 hour', ${sql.raw(column)}, ${ORIGIN})`;
  return sql`
    insert into statistics_hourly (hour)
    select g.hour from (
      select coalesce(
               (select max(s.hour) + interval '1 hour' from statistics_hourly s),
               -- Each kind on its own: min() is then one step of callbacks_stray.
               least((select ${hourOf('min(r.submitted_at)')} from underwriting_requests r),
                     (select ${hourOf('min(c.received_at)')} from callbacks c where c.outcome = 'unmatched'),
                     (select ${hourOf('min(c.received_at)')} from callbacks c where c.outcome = 'invalid'))) as first
    ) f
    cross join generate_series(f.first, ${horizon}::timestamptz - interval '1 hour', interval '1 hour') as g(hour)
    on conflict (hour) do nothing`;
}

/** Open hours before the horizon, after `after`, oldest first (through statistics_hourly_open). */
export function openHoursQuery(horizon: Date, after: Date | null, limit: number) {
  return sql<{ hour: Date }>`
    select s.hour from statistics_hourly s
     where s.closed_at is null and s.hour < ${horizon} and ${after === null ? sql`true` : sql`s.hour > ${after}`}
     order by s.hour
     limit ${limit}`;
}

const AWAITING = sql`('queued', 'submitting', 'submitted')`;

/** The request counts of `rows` (aliased x), as the columns of statistics_hourly. */
const REQUEST_COUNTS = sql`
      count(*) as submitted,
      count(*) filter (where x.status = 'completed') as completed,
      count(*) filter (where x.status = 'expired') as expired,
      count(*) filter (where x.status = 'submit_failed') as submit_failed,
      count(*) filter (where x.decision = 'approved') as approved,
      count(*) filter (where x.decision = 'declined') as declined,
      count(*) filter (where x.decision = 'no_score') as no_score,
      count(*) filter (where x.decision = 'filtered') as filtered`;
const ADD_REQUEST_COUNTS = sql`
      submitted = s.submitted + l.submitted, completed = s.completed + l.completed,
      expired = s.expired + l.expired, submit_failed = s.submit_failed + l.submit_failed,
      approved = s.approved + l.approved, declined = s.declined + l.declined,
      no_score = s.no_score + l.no_score, filtered = s.filtered + l.filtered`;

/**
 * The unmatched and invalid callbacks received in [lo, hi), as `c`: the from and where of the
 * closing pass's and the statistics read's counts. One range of callbacks_stray per outcome (its
 * leading column): with `callbacks c` alone, the index's own predicate (outcome in ('unmatched',
 * 'invalid'), which the where must repeat for the index to apply) had the planner drop the outcome
 * from the condition, and each use walked every stray callback's entry kept (with 20,000 older
 * strays the fold's 43 buffers grew to 269 and the close's 32 to 251; the read's, bb88d66, 43-61 to
 * 250-492). Each use is a lateral subquery kept apart, by `offset 0` or a `group by`: flattened, a
 * never-analysed planner walked both outcomes' whole ranges and applied the bounds afterwards (500
 * buffers for the fold).
 */
export function strayCallbacksIn(lo: RawBuilder<unknown>, hi: RawBuilder<unknown> | Date) {
  return sql`unnest(array['unmatched', 'invalid']) as k(outcome)
            join callbacks c on c.outcome = k.outcome
           where c.outcome in ('unmatched', 'invalid') and c.received_at >= ${lo} and c.received_at < ${hi}`;
}

/**
 * Folds the open hour's unmatched and invalid callbacks up to the fold horizon (they never change;
 * stray_folded_until), and its requests from its watermark (folded_until, or its start) up to a new one:
 * the hour's end, the fold horizon, or the first request still queued in it, or the queue time of
 * one being sent that was queued in it, whichever comes first (a queued request is not listed, and
 * one being sent may return there: neither is ever below a watermark). Those no longer awaiting the
 * provider are added to its counts and turnaround bins (and taken off the list if a pass had listed
 * them); those awaiting it are listed in statistics_unfolded with this hour. One statement: one
 * snapshot for the bound, the rows and the writes. Returns the hour when it moved its watermark.
 */
export function foldHourQuery(hour: Date, horizon: Date) {
  const end = new Date(hour.getTime() + HOUR_MS);
  return sql<{ hour: Date }>`
    with b as (
      select s.hour, coalesce(s.folded_until, s.hour) as lo,
             greatest(coalesce(s.folded_until, s.hour), least(s.hour + interval '1 hour', ${horizon}::timestamptz,
               (select min(q.submitted_at) from underwriting_requests q
                 where q.status = 'queued' and q.submitted_at >= ${hour} and q.submitted_at < ${end}),
               -- Through underwriting_requests_status_list: the few requests being sent.
               (select min(q.queued_at) from underwriting_requests q
                 where q.status = 'submitting' and q.queued_at >= ${hour} and q.queued_at < ${end}))) as hi,
             coalesce(s.stray_folded_until, s.hour) as stray_lo,
             greatest(coalesce(s.stray_folded_until, s.hour), least(s.hour + interval '1 hour', ${horizon}::timestamptz)) as stray_hi
        from statistics_hourly s
       where s.hour = ${hour} and s.closed_at is null
    ),
    r as materialized (
      select x.id, x.status, x.decision, x.submitted_at, x.completed_at
        from b cross join lateral (
          select x.id, x.status, x.decision, x.submitted_at, x.completed_at from underwriting_requests x
           where x.submitted_at >= b.lo and x.submitted_at < b.hi) x
    ),
    counted as materialized (
      select * from r where r.status not in ${AWAITING}
    ),
    stray as (
      -- Through callbacks_stray: each kind one range (strayCallbacksIn).
      select count(*) filter (where c.outcome = 'unmatched') as unmatched,
             count(*) filter (where c.outcome = 'invalid') as invalid
        from b cross join lateral (
          select c.outcome from ${strayCallbacksIn(sql.ref('b.stray_lo'), sql.ref('b.stray_hi'))}
          offset 0) c
    ),
    moved as (
      update statistics_hourly s
         set ${ADD_REQUEST_COUNTS}, folded_until = b.hi,
             unmatched = s.unmatched + c.unmatched, invalid = s.invalid + c.invalid, stray_folded_until = b.stray_hi
        from b, (select ${REQUEST_COUNTS} from counted x) l, stray c
       where s.hour = b.hour and (b.hi > b.lo or b.stray_hi > b.stray_lo)
      returning s.hour
    ),
    bins as (
      insert into turnaround_hourly as t (hour, bin, requests)
      select ${hour}::timestamptz, ${turnaroundBin('x')}, count(*)
        from counted x
       where x.status = 'completed' and x.completed_at is not null
       group by 2
       order by 2
      on conflict (hour, bin) do update set requests = t.requests + excluded.requests
    ),
    listed as (
      insert into statistics_unfolded (request_id, hour)
      select r.id, ${hour}::timestamptz from r where r.status in ${AWAITING}
       order by r.id
      on conflict (request_id) do update set hour = excluded.hour
    ),
    unlisted as (
      delete from statistics_unfolded u using counted c where u.request_id = c.id
    )
    select hour from moved`;
}

/**
 * The listed requests (statistics_unfolded) folded once they no longer await the provider: each
 * added to the counts and bins of its hour (where it is now: a request being sent or sent back
 * moves), when it is below that hour's watermark and the hour is open. Entries whose request is
 * no longer below an open hour's watermark (it moved; its hour closed) are dropped: the range part
 * of the read and of the closing have it. Returns how many it folded.
 */
export function foldListedQuery() {
  return sql<{ folded: string }>`
    with e as materialized (
      select u.request_id, s.hour, x.status, x.decision, x.submitted_at, x.completed_at,
             coalesce(s.closed_at is null and x.submitted_at < s.folded_until, false) as below
        from statistics_unfolded u
        left join underwriting_requests x on x.id = u.request_id
        left join statistics_hourly s on s.hour = date_bin('1 hour', x.submitted_at, ${ORIGIN})
    ),
    counted as materialized (
      select * from e where e.below and e.status not in ${AWAITING}
    ),
    added as (
      update statistics_hourly s
         set ${ADD_REQUEST_COUNTS}
        from (select x.hour, ${REQUEST_COUNTS} from counted x group by x.hour) l
       where s.hour = l.hour
    ),
    bins as (
      insert into turnaround_hourly as t (hour, bin, requests)
      select x.hour, ${turnaroundBin('x')}, count(*)
        from counted x
       where x.status = 'completed' and x.completed_at is not null
       group by 1, 2
       order by 1, 2
      on conflict (hour, bin) do update set requests = t.requests + excluded.requests
    ),
    dropped as (
      delete from statistics_unfolded u using e
       where u.request_id = e.request_id and not (e.below and e.status in ${AWAITING})
    )
    select count(*)::text as folded from counted`;
}

/**
 * Closes the hour unless one of its requests still awaits the provider (from its watermark on, or
 * listed below it), or a request being sent was queued in it (one the provider certainly did not
 * receive goes back to the queue, to the hour it was queued in, and to no other): adds its live
 * requests from the watermark on (those below it are counted already) and its stray callbacks to
 * its counts (those from their watermark on) and sets closed_at. Returns the hour when it closed it.
 */
export function closeHourQuery(hour: Date, now: Date) {
  const end = new Date(hour.getTime() + HOUR_MS);
  return sql<{ hour: Date; lo: Date }>`
    with b as (
      select coalesce(s.folded_until, s.hour) as lo, coalesce(s.stray_folded_until, s.hour) as stray_lo
        from statistics_hourly s where s.hour = ${hour}
    ),
    live as (
      select ${REQUEST_COUNTS},
             count(*) filter (where x.status in ${AWAITING}) as awaiting
        from b cross join lateral (
          select x.status, x.decision from underwriting_requests x
           where x.submitted_at >= b.lo and x.submitted_at < ${end}) x
    ),
    stray as (
      select count(*) filter (where c.outcome = 'unmatched') as unmatched,
             count(*) filter (where c.outcome = 'invalid') as invalid
        from b cross join lateral (
          select c.outcome from ${strayCallbacksIn(sql.ref('b.stray_lo'), end)}
          offset 0) c
    )
    update statistics_hourly s
       set ${ADD_REQUEST_COUNTS},
           unmatched = s.unmatched + c.unmatched, invalid = s.invalid + c.invalid,
           -- A closed hour counts all its rows: no watermark (and migration 0028's guard lets
           -- only a close that clears them close a folded hour).
           closed_at = ${now}, folded_until = null, stray_folded_until = null
      from live l, stray c, b
     where s.hour = ${hour} and s.closed_at is null and l.awaiting = 0
       and not exists (select 1 from statistics_unfolded u where u.hour = ${hour})
       -- Through underwriting_requests_status_list: the few requests being sent. Only the hour a
       -- request was queued in: the hours after it stay closable while a long campaign is sent.
       and not exists (select 1 from underwriting_requests q
                        where q.status = 'submitting' and q.queued_at >= ${hour} and q.queued_at < ${end})
    returning s.hour, b.lo`;
}

/** The closed hour's completed requests from `lo` (its watermark before it closed) on added to its turnaround bins. */
export function closeTurnaroundQuery(hour: Date, lo: Date) {
  const end = new Date(hour.getTime() + HOUR_MS);
  return sql`
    insert into turnaround_hourly as t (hour, bin, requests)
    select ${hour}::timestamptz, ${turnaroundBin('r')}, count(*)
      from underwriting_requests r
     where r.submitted_at >= ${lo} and r.submitted_at < ${end} and r.status = 'completed' and r.completed_at is not null
     group by 2
     order by 2
    on conflict (hour, bin) do update set requests = t.requests + excluded.requests`;
}

/**
 * The plans of closeHour and foldHour: index scans only. Their lookup of a request being sent that
 * was queued in the hour reads the `submitting` entries of underwriting_requests_status_list (and
 * one_in_flight), which every request leaves one of until vacuum. A bitmap scan (the planner's
 * choice, never analysed) visited each of them and its heap page on every pass (6,224 buffers a
 * statement at 200k requests never vacuumed); an index scan marks each dead on its first visit and
 * later passes read only their index pages (2,154: still in proportion to them, until vacuum).
 */
export const HOUR_PASS_PLANS = INDEX_SCANS_ONLY;

/**
 * Closes one hour in a transaction of its own, under the closing lock (a second instance's pass
 * waits, then finds it closed and changes nothing). True when it closed it.
 */
export async function closeHour(db: Kysely<Tables>, hour: Date, now: Date): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    await HOUR_PASS_PLANS.execute(trx);
    await TAKE_CLOSING_LOCK.execute(trx);
    const { rows } = await closeHourQuery(hour, now).execute(trx);
    if (rows.length === 0) return false;
    await closeTurnaroundQuery(hour, new Date(rows[0]!.lo)).execute(trx);
    return true;
  });
}

/**
 * Moves one open hour's watermark (foldHourQuery) in a transaction of its own under the closing
 * lock, as closeHour. True when it moved.
 */
export async function foldHour(db: Kysely<Tables>, hour: Date, horizon: Date): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    await HOUR_PASS_PLANS.execute(trx);
    await TAKE_CLOSING_LOCK.execute(trx);
    const { rows } = await foldHourQuery(hour, horizon).execute(trx);
    return rows.length > 0;
  });
}

/** The listed requests no longer awaiting the provider folded, in a transaction of its own under the closing lock. Returns how many. */
export async function foldListed(db: Kysely<Tables>): Promise<number> {
  return db.transaction().execute(async (trx) => {
    await INDEX_LOOKUPS_ONLY.execute(trx);
    await TAKE_CLOSING_LOCK.execute(trx);
    const { rows } = await foldListedQuery().execute(trx);
    return Number(rows[0]?.folded ?? 0);
  });
}

/** The closing's statements as `npm run sql:snapshot` writes them (docs/layout.md). */
export const SQL_SNAPSHOTS: readonly SqlSnapshot[] = [
  { name: 'add_hours', run: (db) => addHoursQuery(new Date(0)).execute(db) },
  { name: 'open_hours', run: (db) => openHoursQuery(new Date(0), null, 48).execute(db) },
  { name: 'fold_listed', rows: [[], [], [{ folded: '0' }]], run: (db) => foldListed(db) },
  { name: 'fold_hour', rows: [[], [], []], run: (db) => foldHour(db, new Date(0), new Date(0)) },
  { name: 'close_hour', rows: [[], [], [{ hour: new Date(0), lo: new Date(0) }], []], run: (db) => closeHour(db, new Date(0), new Date(0)) },
];
