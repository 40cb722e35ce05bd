import type { FastifyBaseLogger } from 'fastify';
import { type Kysely, sql } from 'kysely';
import { INDEX_LOOKUPS_ONLY } from '../db/plan-guards.js';
import type { Tables } from '../db/types.js';
import { type Periodic, startPeriodic } from '../timing/periodic.js';
import { addHoursQuery, closeHour, openHoursQuery } from './sql.js';

// Closing hours (issue 34, docs/operations.md): an hour none of whose requests awaits the provider
// any more has its live rows added to statistics_hourly and turnaround_hourly, and closed_at set,
// so that the statistics read takes it from one row (and its turnaround bins) instead of its rows.
// What can still change a closed hour's rows (a late callback, erasure, retention's delete) adjusts
// its aggregates in the same transaction (migration 0022's triggers).

const HOUR_MS = 3600_000;

/**
 * How long after its end an hour may be closed at the earliest: nothing is written into an hour
 * after this (requests and callbacks are stamped with the writing instance's clock when they
 * arrive; this covers clocks apart and a write's longest transaction many times over).
 */
export const CLOSE_AFTER_MS = 30 * 60_000;

/** How often each instance runs a closing pass. */
export const CLOSING_INTERVAL_MS = 5 * 60_000;

/** Hours one pass closes at most (each in a short transaction of its own): a long history is closed over several passes. */
export const MAX_HOURS_PER_PASS = 48;

/** The first hour that may not be closed yet at `now`: every hour before it ended CLOSE_AFTER_MS ago. */
export function closingHorizon(now: Date): Date {
  return new Date(Math.floor((now.getTime() - CLOSE_AFTER_MS) / HOUR_MS) * HOUR_MS);
}

export interface ClosingLimits {
  /** Hours one pass closes at most. */
  maxHours: number;
}

/**
 * How far this instance's clock may run behind the database's before each pass warns: the rows it
 * stamps would land CLOSE_AFTER_MS past their hour's end sooner than the others' (docs/operations.md).
 */
export const CLOCK_BEHIND_WARN_MS = 5 * 60_000;

/** The database's clock (every instance reads the same one). */
export async function databaseNow(db: Kysely<Tables>): Promise<Date> {
  const { rows } = await sql<{ now: Date }>`select statement_timestamp() as now`.execute(db);
  return new Date(rows[0]!.now);
}

/**
 * One pass: the open hours before the horizon, oldest first, each closed if it can be. Returns how
 * many it closed. The horizon is the earlier of this instance's and the database's: an instance
 * whose clock runs ahead never closes an hour that the others still write into.
 */
export async function closingPass(
  db: Kysely<Tables>,
  now: Date,
  limits: ClosingLimits = { maxHours: MAX_HOURS_PER_PASS },
  reference: Date = now,
): Promise<number> {
  const horizon = closingHorizon(new Date(Math.min(now.getTime(), reference.getTime())));
  await db.transaction().execute(async (trx) => {
    await INDEX_LOOKUPS_ONLY.execute(trx);
    await addHoursQuery(horizon).execute(trx);
  });
  let closed = 0;
  let after: Date | null = null;
  // An hour still awaiting the provider stays open (looked at again next pass); the hours after it
  // close all the same.
  for (;;) {
    const { rows } = await openHoursQuery(horizon, after, limits.maxHours).execute(db);
    for (const { hour } of rows) {
      if (closed >= limits.maxHours) return closed;
      after = new Date(hour);
      if (await closeHour(db, after, now)) closed += 1;
    }
    if (rows.length < limits.maxHours) return closed;
  }
}

export type ClosingPass = Periodic;

/** The periodic closing pass of one instance; every instance runs one (they queue on the lock). */
export function startClosing(deps: { db: Kysely<Tables>; clock: () => Date; log: FastifyBaseLogger; intervalMs?: number }): ClosingPass {
  return startPeriodic('statistics closing', deps.intervalMs ?? CLOSING_INTERVAL_MS, deps.log, async () => {
    const now = deps.clock();
    const reference = await databaseNow(deps.db);
    const behindMs = reference.getTime() - now.getTime();
    if (behindMs > CLOCK_BEHIND_WARN_MS) {
      deps.log.warn(
        { behindSeconds: Math.round(behindMs / 1000) },
        "this instance's clock runs behind the database's: requests and callbacks it stamps more than 30 minutes late land in hours already closed, which statistics then miss (synchronise the clocks)",
      );
    }
    const closed = await closingPass(deps.db, now, { maxHours: MAX_HOURS_PER_PASS }, reference);
    if (closed > 0) deps.log.debug({ closed }, 'closed statistics hours');
  });
}

