import type { FastifyPluginAsync } from 'fastify';
import type { CapabilityDeps } from '../deps.js';
import { startExpirySweep, type Sweep } from './expiry.js';
import { lifecycleMetrics } from './metrics.js';
import { abandonedAfterMs } from './store.js';

/**
 * The request lifecycle's own process work, started by app.ts: the expiry
 * sweep that ends requests whose callback never came (or whose submit was abandoned).
 */
export const requestLifecycle =
  (deps: Pick<CapabilityDeps, 'config' | 'database' | 'clock' | 'registry' | 'results'>): FastifyPluginAsync =>
  async (app) => {
    const { db } = deps.database;
    const metrics = lifecycleMetrics(deps.registry, deps.config.callbackTimeoutS);
    let sweep: Sweep | undefined;
    app.addHook('onReady', async () => {
      sweep = startExpirySweep({
        db,
        clock: deps.clock,
        timeoutS: deps.config.callbackTimeoutS,
        stuckAfterS: abandonedAfterMs(deps.config.upstreamTimeoutMs) / 1000,
        log: app.log,
        onExpired: (n) => metrics.expired.inc(n),
        announce: (customerUuid) => deps.results.announce(customerUuid),
      });
    });
    app.addHook('onClose', async () => {
      await sweep?.stop();
    });
  };
