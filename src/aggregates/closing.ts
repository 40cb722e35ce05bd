import type { FastifyBaseLogger } from 'fastify';
import { type Kysely, sql } from 'kysely';
import { INDEX_LOOKUPS_ONLY } from '../db/plan-guards.js';
import type { Tables } from '../db/types.js';
import { type Periodic, startPeriodic } from '../timing/periodic.js';
import { addHoursQuery, closeHour, foldHour, foldListed, openHoursQuery } from './sql.js';

// Closing hours (issue 34, docs/operations.md): an hour none of whose requests awaits the provider
// any more has its live rows added to statistics_hourly and turnaround_hourly, and closed_at set,
// so that the statistics read takes it from one row (and its turnaround bins) instead of its rows.
// What can still change a closed hour's rows (a late callback, erasure, retention's delete) adjusts
// its aggregates in the same transaction (migration 0022's triggers).
//
// Before an hour can close, each pass folds its requests up to FOLD_AFTER_MS ago into its counts
// (migration 0028): the read of an open hour then costs its last minutes and what still awaits the
// provider, not all its rows.

const HOUR_MS = 3600_000;

/**
 * How long after its end an hour may be closed at the earliest: nothing is written into an hour
 * after this (requests and callbacks are stamped with the writing instance's clock when they
 * arrive; this covers clocks apart and a write's longest transaction many times over).
 */
export const CLOSE_AFTER_MS = 30 * 60_000;

/**
 * How long before now (the earlier of this instance's clock and the database's) a pass folds an
 * open hour's requests into its counts: writes are stamped when they arrive, and none may commit
 * below this. Neither an insert nor a move out of an awaiting status is ordered with the pass (no
 * trigger runs on them), so this must cover the longest an arrival can wait before its row commits,
 * and clocks apart (warned about past CLOCK_BEHIND_WARN_MS). That wait is bounded, under a minute:
 * a group commit's queue sends an item within 5 s or fails it unwritten (maxQueuedMs), and sends it
 * again alone after a refusal in its batch within 30 s (maxRewrittenMs); then a connection's checkout
 * (3 s) and the statements' timeouts (5 s for callbacks, 15 s otherwise; a campaign's batch holds
 * three). Not behind a transaction-mode pooler whose server has no statement_timeout of its own,
 * which the gateway warns about at start. So a minute for the write and a minute for the clocks,
 * and one to spare. What an open hour's read costs is its rows of the last FOLD_AFTER_MS +
 * CLOSING_INTERVAL_MS: under a steady load, a quarter of what it was with the ten minutes this
 * was until the queues had their limits (docs/performance.md, Open hours).
 */
export const FOLD_AFTER_MS = 3 * 60_000;

/**
 * How often each instance runs a closing pass (one with nothing new to fold took 28 ms at 200k
 * requests never vacuumed: docs/performance.md, Open hours).
 */
export const CLOSING_INTERVAL_MS = 60_000;

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
 * stamps would land below FOLD_AFTER_MS (CLOSE_AFTER_MS past their hour's end) sooner than the
 * others' (docs/operations.md).
 */
export const CLOCK_BEHIND_WARN_MS = 60_000;

/** The database's clock (every instance reads the same one). */
export async function databaseNow(db: Kysely<Tables>): Promise<Date> {
  const { rows } = await sql<{ now: Date }>`select statement_timestamp() as now`.execute(db);
  return new Date(rows[0]!.now);
}

/**
 * One pass: the answered requests a pass had listed folded; the open hours before the fold horizon
 * folded up to it; then the open hours before the closing horizon, oldest first, each closed if it
 * can be. Returns how many it closed. The horizons come from the earlier of this instance's clock
 * and the database's: an instance whose clock runs ahead never folds or closes what the others
 * still write into.
 */
export async function closingPass(
  db: Kysely<Tables>,
  now: Date,
  limits: ClosingLimits = { maxHours: MAX_HOURS_PER_PASS },
  reference: Date = now,
): Promise<number> {
  const earlier = Math.min(now.getTime(), reference.getTime());
  const horizon = closingHorizon(new Date(earlier));
  const foldHorizon = new Date(earlier - FOLD_AFTER_MS);
  // Rows up to the hour the fold horizon falls in (closed_at null), so that it can be folded.
  const hoursUpTo = new Date(Math.floor(foldHorizon.getTime() / HOUR_MS) * HOUR_MS + HOUR_MS);
  await db.transaction().execute(async (trx) => {
    await INDEX_LOOKUPS_ONLY.execute(trx);
    await addHoursQuery(hoursUpTo).execute(trx);
  });
  await foldListed(db);
  await eachOpenHour(db, hoursUpTo, limits.maxHours, (hour) => foldHour(db, hour, foldHorizon));
  // An hour still awaiting the provider stays open (looked at again next pass); the hours after it
  // close all the same.
  return eachOpenHour(db, horizon, limits.maxHours, (hour) => closeHour(db, hour, now));
}

/** `step` on each open hour before `before`, oldest first, until it returned true `max` times. Returns how many times it did. */
async function eachOpenHour(db: Kysely<Tables>, before: Date, max: number, step: (hour: Date) => Promise<boolean>): Promise<number> {
  let done = 0;
  let after: Date | null = null;
  for (;;) {
    const { rows } = await openHoursQuery(before, after, max).execute(db);
    for (const { hour } of rows) {
      if (done >= max) return done;
      after = new Date(hour);
      if (await step(after)) done += 1;
    }
    if (rows.length < max) return done;
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
        "this instance's clock runs behind the database's: requests and callbacks it stamps more than 3 minutes late land in statistics hours already folded (30 minutes: closed), which statistics then miss (synchronise the clocks)",
      );
    }
    const closed = await closingPass(deps.db, now, { maxHours: MAX_HOURS_PER_PASS }, reference);
    if (closed > 0) deps.log.debug({ closed }, 'closed statistics hours');
  });
}

