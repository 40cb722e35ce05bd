import { type Kysely, type RawBuilder, sql } from 'kysely';
import type { Tables } from '../db/types.js';
import { ORIGIN, turnaroundBin } from './turnaround.js';

// Folding rows about to be purged into the hourly aggregates (statistics_hourly, turnaround_hourly),
// which the statistics read beside the live rows. The caller (the retention sweep) holds the rows'
// locks and deletes them in the same transaction, so each row is counted exactly once: live, or
// here. A row of a closed hour (closing.ts) is in its hour's counts already: the delete takes it
// back out (migration 0022's trigger), so it is counted once there too. Aggregate rows are upserted in ascending key order, statistics before turnaround, so sweeps
// running at once on several instances queue on a shared hour instead of deadlocking.

const HOUR = sql`date_bin(interval '1 hour', r.submitted_at, ${ORIGIN})`;

/**
 * Adds counts over the rows `ids` of `from` (aliased) to their hours in statistics_hourly: each
 * column of `counts` gets its aggregate (fixed SQL text, never input) added to what the hour has.
 */
function addToHours(trx: Kysely<Tables>, hour: RawBuilder<unknown>, from: 'underwriting_requests r' | 'callbacks c', counts: Record<string, string>, ids: string) {
  const columns = Object.keys(counts);
  return sql`
    insert into statistics_hourly (hour, ${sql.raw(columns.join(', '))})
    select ${hour}, ${sql.raw(Object.values(counts).join(',\n           '))}
      from ${sql.raw(from)}
     where ${sql.raw(from.slice(-1))}.id = any (${ids}::bigint[])
     group by 1
     order by 1
    on conflict (hour) do update set
      ${sql.raw(columns.map((c) => `${c} = statistics_hourly.${c} + excluded.${c}`).join(',\n      '))}`.execute(trx);
}

/** Adds these requests (ids as a PostgreSQL array literal) to their submission hour's counts and turnaround bins. */
export async function foldRequests(trx: Kysely<Tables>, ids: string): Promise<void> {
  await addToHours(trx, HOUR, 'underwriting_requests r', {
    submitted: 'count(*)',
    completed: "count(*) filter (where r.status = 'completed')",
    expired: "count(*) filter (where r.status = 'expired')",
    submit_failed: "count(*) filter (where r.status = 'submit_failed')",
    approved: "count(*) filter (where r.decision = 'approved')",
    declined: "count(*) filter (where r.decision = 'declined')",
    no_score: "count(*) filter (where r.decision = 'no_score')",
    filtered: "count(*) filter (where r.decision = 'filtered')",
  }, ids);
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
export async function foldStrayCallbacks(trx: Kysely<Tables>, ids: string): Promise<void> {
  await addToHours(trx, sql`date_bin(interval '1 hour', c.received_at, ${ORIGIN})`, 'callbacks c', {
    unmatched: "count(*) filter (where c.outcome = 'unmatched')",
    invalid: "count(*) filter (where c.outcome = 'invalid')",
  }, ids);
}

/** A list of ids as a PostgreSQL array literal: one parameter, the same on pg and PGlite. */
export function idArray(ids: readonly number[]): string {
  return `{${ids.map((id) => String(Math.trunc(id))).join(',')}}`;
}
