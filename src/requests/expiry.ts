import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { Clock } from '../deps.js';
import { runStatement } from '../db/run-statement.js';
import { defineStatement, type Statement } from '../db/statements.js';
import type { Tables } from '../db/types.js';
import { EVENT_TYPE, requestEventsSql } from '../events/record.js';
import { type Periodic, startPeriodic } from '../timing/periodic.js';
import { REQUEST_DATA_COLUMNS, sweepAbandoned } from './sql.js';

/** Rows expired per statement: a long backlog (after an outage) never becomes one huge transaction. */
const BATCH = 1000;

/**
 * How far before the previous sweep's cutoff a sweep starts reading, at least (issue 34). Every
 * request ever answered left a dead entry in the indexes the sweep reads by (its `submitting`
 * version in underwriting_requests_status_list, its `submitted` one in underwriting_requests_waiting),
 * and a read from the beginning visits each one until a vacuum removes them: at 1M answered requests
 * 36,000-44,000 buffers and 170-200 ms for each of the sweep's two reads, every 30 s, in a never
 * vacuumed database. So a sweep reads only what was submitted since the previous one's cutoff, less
 * this overlap (or twice the abandoned bound, if longer): it covers a row another transaction held
 * (skip locked) and left as it was, another instance's clock, a slow commit. What it reads is what
 * was submitted in that window, answered or not (at 100 submits/s, some 15,000 entries a pass),
 * read by index scan only (INDEX_SCANS_ONLY), which marks each dead entry on its first visit so that
 * the next passes over the same stretch skip it (a bitmap scan marks none).
 */
export const SWEEP_OVERLAP_MS = 2 * 60_000;

/** A sweep reads from the beginning when its instance starts and this often after: a row held longer than the overlap. */
export const FULL_SWEEP_EVERY_MS = 60 * 60_000;

/** A request the sweep expired. */
export interface ExpiredRequest {
  id: number;
  customer_uuid: string;
}

/**
 * Marks every request still `submitted` longer than timeoutS before `now` as `expired`, with its
 * underwriting.expired event in the same statement,
 * and returns their ids. Safe with any number of instances at once: rows another sweep (or a
 * callback) holds are skipped, and the status re-check means a row is expired exactly once.
 *
 * (A request still `submitting` is not waiting for a callback but for its submit: past the
 * abandoned bound the sweep ends it as submit_failed, see releaseAbandoned in sql.ts.)
 */
export async function expireOverdue(db: Kysely<Tables>, now: Date, timeoutS: number): Promise<number[]> {
  return (await expireOverdueRequests(db, now, timeoutS)).map((r) => r.id);
}

/** expireOverdue, of the requests submitted at or after `since` when given (SWEEP_OVERLAP_MS). */
export async function expireOverdueRequests(db: Kysely<Tables>, now: Date, timeoutS: number, since?: Date): Promise<ExpiredRequest[]> {
  const expired: ExpiredRequest[] = [];
  for (;;) {
    const rows = await runStatement<ExpiredRequest>(db, EXPIRE_BATCH.submitted, expireBatchParameters(now, timeoutS, since), undefined, undefined, {
      indexScansOnly: true,
    });
    expired.push(...rows);
    if (rows.length < BATCH) break;
  }
  return expired;
}

/**
 * One batch of the sweep, per status (a literal, so that the `submitted` one reads through the
 * partial index underwriting_requests_waiting even as a generic prepared plan).
 */
function expireBatchStatement(status: 'submitted' | 'submitting'): Statement {
  return defineStatement(
    `expire_${status}`,
    `
      with due as (
        select id from underwriting_requests
        where status = '${status}' and submitted_at < $1 and submitted_at >= $3
        limit ${BATCH}
        for update skip locked
      ),
      expired as (
        update underwriting_requests r
        set status = 'expired', updated_at = $2
        from due
        where r.id = due.id and r.status = '${status}'
        returning ${REQUEST_DATA_COLUMNS.replace(/(\w+)/g, 'r.$1')}
      ),
      ${requestEventsSql(EVENT_TYPE.expired, 'expired')}
      select id, customer_uuid from expired`,
  );
}

export const EXPIRE_BATCH = { submitted: expireBatchStatement('submitted') };

/** The batch's parameters: its cutoff, its time, and where it starts reading (from the beginning: '-infinity'). */
export function expireBatchParameters(now: Date, timeoutS: number, since?: Date): unknown[] {
  return [new Date(now.getTime() - timeoutS * 1000), now, since ?? '-infinity'];
}

/** How often the sweep runs: often enough to be timely for short timeouts, at most every 30 s. */
export function sweepIntervalMs(timeoutS: number): number {
  return Math.min(30_000, Math.max(250, (timeoutS * 1000) / 4));
}

export interface SweepDeps {
  db: Kysely<Tables>;
  clock: Clock;
  timeoutS: number;
  /** How long a `submitting` request may stay so before it counts as abandoned (abandonedAfterMs). */
  stuckAfterS: number;
  log: FastifyBaseLogger;
  onExpired(count: number): void;
  /** Told each expired request's customer once the batch (and its events) is committed. */
  announce?: (customerUuid: string) => void;
}

export type Sweep = Periodic;

/**
 * The periodic expiry sweep of one instance; every instance runs one. Each pass reads from its
 * previous cutoffs less the overlap (SWEEP_OVERLAP_MS); from the beginning at start and every
 * FULL_SWEEP_EVERY_MS. After a pass that did not get through (a failure, a full batch of abandoned
 * requests) the next reads again from where that one began.
 */
export function startExpirySweep(deps: SweepDeps): Sweep {
  const overlapMs = Math.max(SWEEP_OVERLAP_MS, 2 * deps.stuckAfterS * 1000);
  // What the last passes got through: every due row submitted before these was ended.
  let releasedThrough: Date | undefined;
  let expiredThrough: Date | undefined;
  let fullAt = -Infinity;
  return startPeriodic('expiry sweep', sweepIntervalMs(deps.timeoutS), deps.log, async () => {
    const now = deps.clock();
    const full = now.getTime() - fullAt >= FULL_SWEEP_EVERY_MS;
    const since = (through: Date | undefined) => (full || through === undefined ? undefined : new Date(through.getTime() - overlapMs));
    const afterMs = deps.stuckAfterS * 1000;
    const { released, complete } = await sweepAbandoned(deps.db, { now, afterMs, since: since(releasedThrough) });
    if (released.length > 0) {
      for (const r of released) deps.announce?.(r.customerUuid);
      deps.log.warn({ count: released.length, afterS: deps.stuckAfterS }, 'released abandoned submits: stored as submit_failed');
    }
    // Not got through: the next pass reads again from where this one began (from the beginning
    // after a pass from the beginning: fullAt stays as it was).
    if (complete) releasedThrough = new Date(now.getTime() - afterMs);
    const expired = await expireOverdueRequests(deps.db, now, deps.timeoutS, since(expiredThrough));
    expiredThrough = new Date(now.getTime() - deps.timeoutS * 1000);
    if (full && complete) fullAt = now.getTime();
    for (const r of expired) deps.announce?.(r.customer_uuid);
    const ids = expired.map((r) => r.id);
    if (ids.length > 0) {
      deps.onExpired(ids.length);
      deps.log.info({ count: ids.length, timeoutS: deps.timeoutS }, 'expired requests whose callback never came');
    }
  });
}
