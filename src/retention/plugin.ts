import type { FastifyPluginAsync } from 'fastify';
import fp from 'fastify-plugin';
import { Counter } from 'prom-client';
import type { CapabilityDeps } from '../deps.js';
import { PURGED_TABLES, type PurgeLimits, type RetentionSweep, startRetentionSweep } from './sweep.js';

export interface RetentionOptions {
  limits?: PurgeLimits;
  intervalMs?: number;
}

/**
 * RETENTION_DAYS: every instance runs the sweep (they share the work through row locks). Unset:
 * everything is kept, and a production gateway says so at start.
 */
export const retention =
  (deps: Pick<CapabilityDeps, 'config' | 'database' | 'clock' | 'registry'>, options: RetentionOptions = {}): FastifyPluginAsync =>
  // Not encapsulated: app.retentionSweep is visible on the app.
  fp(async (app) => {
    const purgedRows = new Counter({
      name: 'underwriting_retention_purged_rows_total',
      help: 'Rows this instance deleted because they were older than RETENTION_DAYS, by table',
      labelNames: ['table'] as const,
      registers: [deps.registry],
    });
    // Present from the start, so a dashboard tells "nothing purged" from "no data".
    for (const table of PURGED_TABLES) purgedRows.inc({ table }, 0);

    const { retentionDays } = deps.config;
    let sweep: RetentionSweep | undefined;
    app.addHook('onReady', async () => {
      if (retentionDays === undefined) {
        if (deps.config.nodeEnv === 'production') {
          app.log.warn('RETENTION_DAYS is not set: requests, callbacks and their personal data are kept forever');
        }
        return;
      }
      sweep = startRetentionSweep({
        db: deps.database.db,
        clock: deps.clock,
        retentionDays,
        log: app.log,
        onPurged: (purged) => {
          for (const table of PURGED_TABLES) if (purged[table] > 0) purgedRows.inc({ table }, purged[table]);
        },
        ...options,
      });
    });
    app.addHook('onClose', async () => sweep?.stop());
    // Tests (and an operator's tooling) may run a pass on demand.
    app.decorate('retentionSweep', { run: async () => sweep?.run() });
  });

declare module 'fastify' {
  interface FastifyInstance {
    retentionSweep: { run(): Promise<void> };
  }
}
