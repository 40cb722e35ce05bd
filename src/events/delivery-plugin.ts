import type { FastifyPluginAsync } from 'fastify';
import type { CapabilityDeps } from '../deps.js';
import { redactUrl } from '../observability/logger.js';
import type { EndpointRegistry } from './endpoints/registry.js';
import { redactStoredUrls, syncConfiguredEndpoints } from './endpoints/sql.js';
import type { EventMetrics } from './metrics.js';
import { startDispatch } from './queue-sql.js';
import { webhookTargets } from './targets.js';
import { type DeliveryWorker, startDeliveryWorker } from './worker.js';

/** This instance's delivery worker once started: what a redelivery wakes. */
export interface DeliveryWorkerSlot {
  current: DeliveryWorker | undefined;
  /** Something is due now: the worker (when running) looks at once. */
  wake(): void;
}

export function deliveryWorkerSlot(): DeliveryWorkerSlot {
  const slot: DeliveryWorkerSlot = { current: undefined, wake: () => slot.current?.wake() };
  return slot;
}

export interface DeliveryParts {
  endpoints: EndpointRegistry;
  metrics: Pick<EventMetrics, 'result'>;
  worker: DeliveryWorkerSlot;
}

/**
 * This instance's share of the push deliveries to every endpoint (configured or managed through
 * /v1/endpoints): the worker starts when the app is ready and stops (attempts in flight finished
 * and written) when it closes.
 */
export const deliveries =
  (deps: Pick<CapabilityDeps, 'config' | 'database' | 'clock' | 'ingest' | 'tracer' | 'handoff' | 'results'>, parts: DeliveryParts): FastifyPluginAsync =>
  async (app) => {
    const { db } = deps.database;
    const { endpoints, metrics, worker } = parts;
    const configured = webhookTargets(deps.config);
    const unsubscribe: Array<() => void> = [];

    // The first read re-keys rows named by an older key (docs/endpoints.md), then writes the
    // configured endpoints' rows.
    await endpoints.refresh();
    if (deps.config.eventWebhooks !== undefined) {
      // Before anything of this instance records an event: a target configured for the first time
      // gets every event from here on. When the database cannot be reached now, the worker's first
      // claim starts the dispatch and the registry's refresh writes the endpoints.
      await startDispatch(db, configured, deps.clock())
        .then(() => syncConfiguredEndpoints(db, configured, deps.clock()))
        .catch((err: Error) => app.log.warn({ err: { message: err.message } }, 'could not set up event dispatch yet; the delivery worker retries'));
    }
    await redactStoredUrls(db, redactUrl)
      .then((ids) => ids.length > 0 && app.log.info({ endpoints: ids }, 'endpoint URLs shown anew, redacted as this version does'))
      .catch((err: Error) => app.log.warn({ err: { message: err.message } }, 'could not show stored endpoint URLs anew; next start tries again'));
    deps.handoff.onEndpointsChanged(() => endpoints.refresh());

    app.addHook('onReady', async () => {
      const started = startDeliveryWorker({
        db,
        endpoints,
        clock: deps.clock,
        timeoutMs: deps.config.eventWebhookTimeoutMs,
        horizonS: deps.config.eventRetryHorizonS,
        disableAfterS: deps.config.eventEndpointDisableAfterS,
        log: app.log,
        onResult: (result, lagS) => metrics.result(result, lagS),
        ingest: deps.ingest,
        tracer: deps.tracer,
      });
      worker.current = started;
      // A change committed on any instance: its event may be due here (what this instance
      // writes, it sends as it commits: see the handoff).
      unsubscribe.push(deps.results.onAny(started.nudge));
      deps.handoff.attach(started);
      endpoints.onChange(() => started.wake());
      if (configured.length > 0) app.log.info({ urls: configured.map((t) => t.shown) }, 'pushing outcome events');
    });
    app.addHook('onClose', async () => {
      for (const stop of unsubscribe) stop();
      deps.handoff.attach(undefined);
      deps.handoff.onEndpointsChanged(undefined);
      endpoints.stop();
      await worker.current?.stop();
    });
  };
