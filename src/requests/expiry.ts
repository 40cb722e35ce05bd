import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { Clock } from '../deps.js';
import { isStorageUnavailable } from '../db/database.js';
import type { DB } from '../db/types.js';
import { releaseAbandoned } from './store.js';

/** Rows expired per statement: a long backlog (after an outage) never becomes one huge transaction. */
const BATCH = 1000;

/**
 * Marks every request still `submitted` longer than timeoutS before `now` as `expired`, and returns
 * their ids. Safe with any number of instances at once: rows another sweep (or a callback) holds are
 * skipped, and the status re-check means a row is expired exactly once.
 *
 * (A request still `submitting` is not waiting for a callback but for its submit: past the
 * abandoned bound the sweep ends it as submit_failed, see releaseAbandoned in store.ts.)
 */
export async function expireOverdue(db: Kysely<DB>, now: Date, timeoutS: number): Promise<number[]> {
  const expired: number[] = [];
  for (;;) {
    const rows = await expireBatchQuery(db, now, timeoutS).execute();
    expired.push(...rows.map((r) => r.id));
    if (rows.length < BATCH) break;
  }
  return expired;
}

/** One batch of the sweep; for `submitted` it reads through the partial index underwriting_requests_waiting. */
export function expireBatchQuery(
  db: Kysely<DB>,
  now: Date,
  timeoutS: number,
  status: 'submitted' | 'submitting' = 'submitted',
) {
  const cutoff = new Date(now.getTime() - timeoutS * 1000);
  return db
    .updateTable('underwriting_requests')
    .set({ status: 'expired', updated_at: now })
    .where('status', '=', status)
    .where('id', 'in', (eb) =>
      eb
        .selectFrom('underwriting_requests')
        .select('id')
        .where('status', '=', status)
        .where('submitted_at', '<', cutoff)
        .limit(BATCH)
        .forUpdate()
        .skipLocked(),
    )
    .returning('id');
}

/** How often the sweep runs: often enough to be timely for short timeouts, at most every 30 s. */
export function sweepIntervalMs(timeoutS: number): number {
  return Math.min(30_000, Math.max(250, (timeoutS * 1000) / 4));
}

export interface SweepDeps {
  db: Kysely<DB>;
  clock: Clock;
  timeoutS: number;
  /** How long a `submitting` request may stay so before it counts as abandoned (abandonedAfterMs). */
  stuckAfterS: number;
  log: FastifyBaseLogger;
  onExpired(count: number): void;
}

export interface Sweep {
  /** Runs one sweep now (skipped when one is already running); never throws. */
  run(): Promise<void>;
  stop(): Promise<void>;
}

/** The periodic expiry sweep of one instance; every instance runs one. */
export function startExpirySweep(deps: SweepDeps): Sweep {
  let running: Promise<void> | undefined;
  const run = () => {
    running ??= (async () => {
      try {
        const now = deps.clock();
        const released = await releaseAbandoned(deps.db, { now, afterMs: deps.stuckAfterS * 1000 });
        if (released.length > 0) {
          deps.log.warn({ count: released.length, afterS: deps.stuckAfterS }, 'released abandoned submits: stored as submit_failed');
        }
        const ids = await expireOverdue(deps.db, now, deps.timeoutS);
        if (ids.length > 0) {
          deps.onExpired(ids.length);
          deps.log.info({ count: ids.length, timeoutS: deps.timeoutS }, 'expired requests whose callback never came');
        }
      } catch (err) {
        if (isStorageUnavailable(err)) deps.log.warn({ err: { message: (err as Error).message } }, 'expiry sweep skipped: database unavailable');
        else deps.log.error({ err }, 'expiry sweep failed');
      } finally {
        running = undefined;
      }
    })();
    return running;
  };
  const timer = setInterval(() => void run(), sweepIntervalMs(deps.timeoutS));
  timer.unref();
  return {
    run,
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
