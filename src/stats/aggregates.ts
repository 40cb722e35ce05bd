import { type Kysely, sql } from 'kysely';
import type { DB } from '../db/types.js';
import { ORIGIN, turnaroundBin } from './turnaround.js';

// Folding rows about to be purged into the hourly aggregates. The caller holds the rows' locks and
// deletes them in the same transaction, so each row is counted exactly once: live, or here.
// Aggregate rows are upserted in ascending key order, statistics before turnaround, so sweeps
// running at once on several instances queue on a shared hour instead of deadlocking.

const HOUR = sql`date_bin(interval '1 hour', r.submitted_at, ${ORIGIN})`;

/** Adds these requests (ids as a PostgreSQL array literal) to their submission hour's counts and turnaround bins. */
export async function foldRequests(trx: Kysely<DB>, ids: string): Promise<void> {
  await sql`
    insert into statistics_hourly
      (hour, submitted, completed, expired, submit_failed, approved, declined, no_score, filtered)
    select ${HOUR}, count(*),
           count(*) filter (where r.status = 'completed'),
           count(*) filter (where r.status = 'expired'),
           count(*) filter (where r.status = 'submit_failed'),
           count(*) filter (where r.decision = 'approved'),
           count(*) filter (where r.decision = 'declined'),
           count(*) filter (where r.decision = 'no_score'),
           count(*) filter (where r.decision = 'filtered')
      from underwriting_requests r
     where r.id = any (${ids}::bigint[])
     group by 1
     order by 1
    on conflict (hour) do update set
      submitted = statistics_hourly.submitted + excluded.submitted,
      completed = statistics_hourly.completed + excluded.completed,
      expired = statistics_hourly.expired + excluded.expired,
      submit_failed = statistics_hourly.submit_failed + excluded.submit_failed,
      approved = statistics_hourly.approved + excluded.approved,
      declined = statistics_hourly.declined + excluded.declined,
      no_score = statistics_hourly.no_score + excluded.no_score,
      filtered = statistics_hourly.filtered + excluded.filtered`.execute(trx);
  await sql`
    insert into turnaround_hourly (hour, bin, requests)
    select ${HOUR}, ${turnaroundBin('r')}, count(*)
      from underwriting_requests r
     where r.id = any (${ids}::bigint[]) and r.status = 'completed' and r.completed_at is not null
     group by 1, 2
     order by 1, 2
    on conflict (hour, bin) do update set requests = turnaround_hourly.requests + excluded.requests`.execute(trx);
}

/** Adds these unmatched and invalid callbacks to their arrival hour's counts. */
export async function foldStrayCallbacks(trx: Kysely<DB>, ids: string): Promise<void> {
  await sql`
    insert into statistics_hourly (hour, unmatched, invalid)
    select date_bin(interval '1 hour', c.received_at, ${ORIGIN}),
           count(*) filter (where c.outcome = 'unmatched'),
           count(*) filter (where c.outcome = 'invalid')
      from callbacks c
     where c.id = any (${ids}::bigint[])
     group by 1
     order by 1
    on conflict (hour) do update set
      unmatched = statistics_hourly.unmatched + excluded.unmatched,
      invalid = statistics_hourly.invalid + excluded.invalid`.execute(trx);
}

/** A list of ids as a PostgreSQL array literal: one parameter, the same on pg and PGlite. */
export function idArray(ids: readonly number[]): string {
  return `{${ids.map((id) => String(Math.trunc(id))).join(',')}}`;
}
