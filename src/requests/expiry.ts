import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { Clock } from '../deps.js';
import { runStatement } from '../db/run-statement.js';
import { defineStatement, type Statement } from '../db/statements.js';
import type { Tables } from '../db/types.js';
import { EVENT_TYPE, requestEventsSql } from '../events/record.js';
import { type Periodic, startPeriodic } from '../timing/periodic.js';
import { releaseAbandoned, REQUEST_DATA_COLUMNS } from './sql.js';

/** Rows expired per statement: a long backlog (after an outage) never becomes one huge transaction. */
const BATCH = 1000;

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

export async function expireOverdueRequests(db: Kysely<Tables>, now: Date, timeoutS: number): Promise<ExpiredRequest[]> {
  const expired: ExpiredRequest[] = [];
  for (;;) {
    const rows = await runStatement<ExpiredRequest>(db, EXPIRE_BATCH.submitted, expireBatchParameters(now, timeoutS));
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
        where status = '${status}' and submitted_at < $1
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

export function expireBatchParameters(now: Date, timeoutS: number): unknown[] {
  return [new Date(now.getTime() - timeoutS * 1000), now];
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

/** The periodic expiry sweep of one instance; every instance runs one. */
export function startExpirySweep(deps: SweepDeps): Sweep {
  return startPeriodic('expiry sweep', sweepIntervalMs(deps.timeoutS), deps.log, async () => {
    const now = deps.clock();
    const released = await releaseAbandoned(deps.db, { now, afterMs: deps.stuckAfterS * 1000 });
    if (released.length > 0) {
      for (const r of released) deps.announce?.(r.customerUuid);
      deps.log.warn({ count: released.length, afterS: deps.stuckAfterS }, 'released abandoned submits: stored as submit_failed');
    }
    const expired = await expireOverdueRequests(deps.db, now, deps.timeoutS);
    for (const r of expired) deps.announce?.(r.customer_uuid);
    const ids = expired.map((r) => r.id);
    if (ids.length > 0) {
      deps.onExpired(ids.length);
      deps.log.info({ count: ids.length, timeoutS: deps.timeoutS }, 'expired requests whose callback never came');
    }
  });
}
