import type { FastifyPluginAsync } from 'fastify';
import { startExpirySweep, type Sweep, type SweepDeps } from './expiry.js';
import type { LifecycleMetrics } from './metrics.js';

/** What the request lifecycle's process work uses (compose.ts builds it): the sweep's own deps, its metrics. */
export type LifecycleDeps = Omit<SweepDeps, 'log' | 'onExpired'> & { metrics: LifecycleMetrics };

/**
 * The request lifecycle's own process work, registered by app.ts: the expiry
 * sweep that ends requests whose callback never came (or whose submit was abandoned).
 */
export const requestLifecycle =
  ({ metrics, ...sweepDeps }: LifecycleDeps): FastifyPluginAsync =>
  async (app) => {
    let sweep: Sweep | undefined;
    app.addHook('onReady', async () => {
      sweep = startExpirySweep({ ...sweepDeps, log: app.log, onExpired: (n) => metrics.expired.inc(n) });
    });
    app.addHook('onClose', async () => {
      await sweep?.stop();
    });
  };
