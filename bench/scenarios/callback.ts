import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import type { AbScenario } from '../lib/compare.js';
import { seedSubmitted } from '../lib/database.js';
import { resultNow, seedWaiting } from '../lib/states.js';

// Callback ingest: every request is a distinct provider result for a request seeded as
// 'submitted', so each one is stored, matched and completes its request.

// Results "start" after their requests were seeded, however long the run: a callback matches only a
// request submitted no later than its `started` plus CORRELATION_SKEW_S. (Whole seconds, as wrk's script.)
const EPOCH = Math.floor(Date.now() / 1000 + 86_400) * 1000;
/** The same bodies for wrk (bench/wrk/callback.lua builds them exactly as callbackBody does). */
const WRK_SCRIPT = fileURLToPath(new URL('../../../bench/wrk/callback.lua', import.meta.url));
export const CALLBACK_PATH = '/v1/callbacks/underwriting';

export function callbackBody(customerUuid: string, n: number): string {
  const started = new Date(EPOCH + n * 1000).toISOString();
  const finished = new Date(EPOCH + n * 1000 + 750).toISOString();
  return JSON.stringify({
    customerUuid,
    started,
    finished,
    serviceType: 'CREDIT_SCORE',
    response: { costSavingEnabled: false, score: 300 + (n % 600), riskBand: 1 + (n % 5), limit: (n % 4) * 1500 },
  });
}

export function callbackScenario(pool: pg.Pool, options: { minRows: number }): AbScenario {
  return {
    name: 'callback',
    connections: 32,
    wrk: true,
    prepare: async ({ runId, durationS, rateHint }) => {
      // Enough rows for 3x the fastest rate seen so far (the first run guesses generously).
      const rows = Math.max(options.minRows, Math.ceil((rateHint ?? 4000) * durationS * 3) + 1000);
      await seedSubmitted(pool, runId, rows);
      return {
        limit: rows,
        build: (n) => ({ method: 'POST', path: CALLBACK_PATH, body: callbackBody(`${runId}${n}`, n) }),
        wrk: { script: WRK_SCRIPT, path: CALLBACK_PATH, env: { CALLBACK_PREFIX: runId, CALLBACK_EPOCH_S: String(EPOCH / 1000) } },
      };
    },
  };
}

/**
 * The same A/B in a bench state (bench/lib/states.ts): each run's requests written as a submit
 * leaves them (two row versions, no ANALYZE, no CHECKPOINT), results `started` a few seconds
 * before now. Rows for 1.5x the fastest rate seen, so that the table grows by what runs use.
 */
export function callbackStateScenario(pool: pg.Pool, name: string): AbScenario {
  return {
    name,
    connections: 32,
    wrk: true,
    prepare: async ({ runId, durationS, rateHint }) => {
      const rows = Math.ceil((rateHint ?? 3000) * durationS * 1.5) + 500;
      await seedWaiting(pool, runId, rows);
      return {
        limit: rows,
        build: (n) => ({ method: 'POST', path: CALLBACK_PATH, body: resultNow(`${runId}${n}`, n) }),
        wrk: {
          script: WRK_SCRIPT,
          path: CALLBACK_PATH,
          env: { CALLBACK_PREFIX: runId, CALLBACK_EPOCH_S: String(Math.floor(Date.now() / 1000) - 3), CALLBACK_FIXED_START: '1' },
        },
      };
    },
  };
}
