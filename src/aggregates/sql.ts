import { type Kysely, sql } from 'kysely';
import { INDEX_LOOKUPS_ONLY } from '../db/plan-guards.js';
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

/**
 * Closes the hour unless one of its requests still awaits the provider, or a request being sent
 * was queued in it (one the provider certainly did not receive goes back to the queue, to the hour
 * it was queued in, and to no other): adds its live requests and stray callbacks to its counts and
 * sets closed_at. Returns the hour when it closed it.
 */
export function closeHourQuery(hour: Date, now: Date) {
  const end = new Date(hour.getTime() + HOUR_MS);
  return sql<{ hour: Date }>`
    with live as (
      select count(*) as submitted,
             count(*) filter (where r.status = 'completed') as completed,
             count(*) filter (where r.status = 'expired') as expired,
             count(*) filter (where r.status = 'submit_failed') as submit_failed,
             count(*) filter (where r.decision = 'approved') as approved,
             count(*) filter (where r.decision = 'declined') as declined,
             count(*) filter (where r.decision = 'no_score') as no_score,
             count(*) filter (where r.decision = 'filtered') as filtered,
             count(*) filter (where r.status in ('queued', 'submitting', 'submitted')) as awaiting
        from underwriting_requests r
       where r.submitted_at >= ${hour} and r.submitted_at < ${end}
    ),
    stray as (
      select count(*) filter (where c.outcome = 'unmatched') as unmatched,
             count(*) filter (where c.outcome = 'invalid') as invalid
        from callbacks c
       where c.outcome in ('unmatched', 'invalid') and c.received_at >= ${hour} and c.received_at < ${end}
    )
    update statistics_hourly s
       set submitted = s.submitted + l.submitted, completed = s.completed + l.completed,
           expired = s.expired + l.expired, submit_failed = s.submit_failed + l.submit_failed,
           approved = s.approved + l.approved, declined = s.declined + l.declined,
           no_score = s.no_score + l.no_score, filtered = s.filtered + l.filtered,
           unmatched = s.unmatched + c.unmatched, invalid = s.invalid + c.invalid,
           closed_at = ${now}
      from live l, stray c
     where s.hour = ${hour} and s.closed_at is null and l.awaiting = 0
       -- Through underwriting_requests_status_list: the few requests being sent. Only the hour a
       -- request was queued in: the hours after it stay closable while a long campaign is sent.
       and not exists (select 1 from underwriting_requests q
                        where q.status = 'submitting' and q.queued_at >= ${hour} and q.queued_at < ${end})
    returning s.hour`;
}

/** The closed hour's completed requests added to its turnaround bins. */
export function closeTurnaroundQuery(hour: Date) {
  const end = new Date(hour.getTime() + HOUR_MS);
  return sql`
    insert into turnaround_hourly as t (hour, bin, requests)
    select ${hour}::timestamptz, ${turnaroundBin('r')}, count(*)
      from underwriting_requests r
     where r.submitted_at >= ${hour} and r.submitted_at < ${end} and r.status = 'completed' and r.completed_at is not null
     group by 2
     order by 2
    on conflict (hour, bin) do update set requests = t.requests + excluded.requests`;
}

/**
 * Closes one hour in a transaction of its own, under the closing lock (a second instance's pass
 * waits, then finds it closed and changes nothing). True when it closed it.
 */
export async function closeHour(db: Kysely<Tables>, hour: Date, now: Date): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    await INDEX_LOOKUPS_ONLY.execute(trx);
    await TAKE_CLOSING_LOCK.execute(trx);
    const { rows } = await closeHourQuery(hour, now).execute(trx);
    if (rows.length === 0) return false;
    await closeTurnaroundQuery(hour).execute(trx);
    return true;
  });
}

/** The closing's statements as `npm run sql:snapshot` writes them (docs/layout.md). */
export const SQL_SNAPSHOTS: readonly SqlSnapshot[] = [
  { name: 'add_hours', run: (db) => addHoursQuery(new Date(0)).execute(db) },
  { name: 'open_hours', run: (db) => openHoursQuery(new Date(0), null, 48).execute(db) },
  { name: 'close_hour', rows: [[], [], [{ hour: new Date(0) }], []], run: (db) => closeHour(db, new Date(0), new Date(0)) },
];
