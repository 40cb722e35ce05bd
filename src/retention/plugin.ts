import type { FastifyPluginAsync } from 'fastify';
import fp from 'fastify-plugin';
import type { RetentionMetrics } from './metrics.js';
import { type RetentionDeps as SweepDeps, type RetentionSweep, startRetentionSweep } from './sweep.js';

/** What the retention sweep's plugin uses (compose.ts builds it). */
export type RetentionDeps = Omit<SweepDeps, 'log' | 'onPurged' | 'retentionDays'> & {
  /** RETENTION_DAYS; unset keeps everything. */
  retentionDays: number | undefined;
  /** Whether keeping everything is said at start (a production gateway). */
  warnWhenUnset: boolean;
  metrics: RetentionMetrics;
};

/**
 * RETENTION_DAYS: every instance runs the sweep (they share the work through row locks). Unset:
 * everything is kept, and a production gateway says so at start.
 */
export const retention = ({ retentionDays, warnWhenUnset, metrics, ...sweepDeps }: RetentionDeps): FastifyPluginAsync =>
  // Not encapsulated: app.retentionSweep is visible on the app.
  fp(async (app) => {
    let sweep: RetentionSweep | undefined;
    app.addHook('onReady', async () => {
      if (retentionDays === undefined) {
        if (warnWhenUnset) {
          app.log.warn('RETENTION_DAYS is not set: requests, callbacks and their personal data are kept forever');
        }
        return;
      }
      sweep = startRetentionSweep({ ...sweepDeps, retentionDays, log: app.log, onPurged: metrics.purged });
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
