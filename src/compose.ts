import type { FastifyBaseLogger } from 'fastify';
import { statisticsClosing } from './aggregates/plugin.js';
import { callbackMetrics } from './callbacks/metrics.js';
import { callbackService } from './callbacks/service.js';
import { campaignMetrics } from './campaigns/metrics.js';
import { campaignService } from './campaigns/service.js';
import type { CapabilityDeps } from './deps.js';
import { deliveryWorkerSlot } from './events/delivery-plugin.js';
import { endpointRegistry } from './events/endpoints/registry.js';
import { endpointService } from './events/endpoints/service.js';
import { endpointKeys } from './events/endpoints/sql.js';
import { eventMetrics } from './events/metrics.js';
import { eventService } from './events/service.js';
import { webhookTargets } from './events/targets.js';
import { urlKeyer } from './events/url-key.js';
import { personalDataMetrics } from './personal-data/metrics.js';
import { personalDataService } from './personal-data/service.js';
import { tokenState } from './provider/token-source.js';
import { queryMetrics } from './queries/metrics.js';
import { queryService } from './queries/service.js';
import { requestLifecycle } from './requests/lifecycle.js';
import { lifecycleMetrics } from './requests/metrics.js';
import { abandonedAfterMs } from './requests/sql.js';
import { retentionMetrics } from './retention/metrics.js';
import { retention } from './retention/plugin.js';
import { presentMetrics } from './stats/metrics.js';
import { statsService } from './stats/service.js';
import { createSubmissions } from './submissions/service.js';

/**
 * Every capability's service, built once from the app's dependencies: app.ts hands each route
 * plugin its own service (and the access settings its guards read), never the whole CapabilityDeps.
 */
export function composeServices(deps: CapabilityDeps, log: FastifyBaseLogger) {
  const { config, clock } = deps;
  const { db } = deps.database;
  const configuredKeys = webhookTargets(config).map((t) => t.key);

  // Metrics in the order a scrape has always listed them.
  const lifecycle = requestLifecycle({
    db,
    clock,
    timeoutS: config.callbackTimeoutS,
    stuckAfterS: abandonedAfterMs(config.upstreamTimeoutMs) / 1000,
    metrics: lifecycleMetrics(deps.registry, config.callbackTimeoutS),
    announce: (customerUuid) => deps.results.announce(customerUuid),
  });
  const submissions = createSubmissions(deps, log);
  const callbacksMetrics = callbackMetrics(deps.registry);
  const queriesMetrics = queryMetrics(deps.registry);
  const personalMetrics = personalDataMetrics(deps.registry);
  const webhookKeys = () => endpointKeys(db, configuredKeys);
  presentMetrics(deps.registry, { db, clock, webhookKeys });
  const eventsMetrics = eventMetrics(deps.registry);

  // The endpoints every delivery worker reads; the feed and redelivery read them too.
  const endpoints = endpointRegistry({ db, configured: config.eventWebhooks, urlKeys: urlKeyer(config.cpfHashKeys), log, clock });
  const deliveryWorker = deliveryWorkerSlot();

  const services = {
    /** The expiry sweep's plugin. */
    lifecycle,
    submissions,
    campaigns: campaignService({
      db,
      clock,
      cpfHashKey: config.cpfHashKey,
      keyDigests: submissions.keyDigests,
      customerUuidAllowCpf: config.customerUuidAllowCpf,
      queue: submissions.queue,
      metrics: campaignMetrics(deps.registry, { db, clock }),
    }),
    callbacks: callbackService({
      db,
      clock,
      metrics: callbacksMetrics,
      announce: (customerUuid) => deps.results.announce(customerUuid),
      skewS: config.correlationSkewS,
      handoff: deps.handoff,
      ingest: deps.ingest,
      customerUuidAllowCpf: config.customerUuidAllowCpf,
      cpfHashKeys: config.cpfHashKeys,
    }),
    queries: queryService({
      db,
      clock,
      results: deps.results,
      cpfHashKeys: config.cpfHashKeys,
      queryApiKeys: config.queryApiKeys,
      metrics: queriesMetrics,
    }),
    personalData: personalDataService({ db, clock, cpfHashKeys: config.cpfHashKeys, metrics: personalMetrics }),
    stats: statsService({ db, clock, token: () => tokenState(deps.tokenSource), cursorSecret: config.cpfHashKey, webhookKeys }),
    events: eventService({ db, clock, waitAny: deps.results.waitAny, metrics: eventsMetrics, endpoints, wake: deliveryWorker.wake }),
    /** What the delivery worker's plugin runs on. */
    deliveries: { endpoints, metrics: eventsMetrics, worker: deliveryWorker },
    endpoints: endpointService({ db, clock, configuredKeys, changed: () => deps.handoff.endpointsChanged() }),
  };
  // The retention sweep's plugin; its metrics after every service's, as a scrape has listed them.
  const retentionSweep = retention({
    db,
    clock,
    retentionDays: config.retentionDays,
    warnWhenUnset: config.nodeEnv === 'production',
    metrics: retentionMetrics(deps.registry),
  });
  // Closed hours rolled up for the statistics read, on every instance.
  const closing = statisticsClosing({ db, clock });
  return { ...services, retention: retentionSweep, statisticsClosing: closing };
}
export type Services = ReturnType<typeof composeServices>;
