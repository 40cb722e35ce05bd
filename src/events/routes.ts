import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { guardRoutes } from '../access/guards.js';
import type { CapabilityDeps } from '../deps.js';
import { errorSchema, guardedRouteErrors, notFound } from '../errors.js';
import { eventView, readFeedPage } from './feed.js';
import { eventMetrics } from './metrics.js';
import { operation } from '../openapi.js';
import {
  bulkRedeliverBody,
  DEFAULT_FEED_PAGE,
  eventParams,
  eventView as eventSchema,
  feedQuery,
  feedView,
  queuedView,
} from './schemas.js';
import { endpointRegistry } from './endpoints/registry.js';
import { syncConfiguredEndpoints } from './endpoints/store.js';
import { readEvent } from './feed-sql.js';
import { startDispatch } from './queue-sql.js';
import { redeliverDeliveries, redeliverEvent } from './redelivery-sql.js';
import { webhookTargets } from './targets.js';
import { type DeliveryWorker, startDeliveryWorker } from './worker.js';

const errors = { ...guardedRouteErrors, 404: errorSchema };

/**
 * Outcome events: the feed and redelivery routes (query allowlist and keys), and this instance's
 * share of the push deliveries to every endpoint (configured or managed through /v1/endpoints).
 */
export const eventRoutes =
  (deps: CapabilityDeps): FastifyPluginAsyncZod =>
  async (app) => {
    const { db } = deps.database;
    const webhooks = deps.config.eventWebhooks;
    const configured = webhookTargets(deps.config);
    const endpoints = endpointRegistry({ db, configured: webhooks, log: app.log, clock: deps.clock });
    const keys = () => endpoints.targets().map((t) => t.key);
    const metrics = eventMetrics(deps.registry);
    const unsubscribe: Array<() => void> = [];
    let worker: DeliveryWorker | undefined;

    guardRoutes(app, 'query', deps.config);

    if (webhooks !== undefined) {
      // Before anything of this instance records an event: a target configured for the first time
      // gets every event from here on. (Unreachable now: the worker's first claim does it.)
      await startDispatch(db, configured, deps.clock())
        .then(() => syncConfiguredEndpoints(db, configured, deps.clock()))
        .catch((err: Error) => app.log.warn({ err: { message: err.message } }, 'could not set up event dispatch yet; the delivery worker retries'));
    }
    await endpoints.refresh();
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
      worker = started;
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
      await worker?.stop();
    });

    app.get(
      '/v1/events',
      {
        schema: {
          ...operation('listEvents', 'query'),
          tags: ['events'],
          summary: 'Outcome events, oldest first, paged by an opaque cursor',
          description:
            'With ?wait=N (0-30 s), holds the reply while nothing is newer than after, until an event is committed (on any instance) or N seconds pass.',
          querystring: feedQuery,
          response: { 200: feedView, ...errors },
        },
      },
      async (request) => {
        const q = request.query;
        return readFeedPage(
          { db, waitAny: deps.results.waitAny, onWaiting: (delta) => metrics.waiting(delta), keys: keys() },
          { after: q.after, limit: q.limit ?? DEFAULT_FEED_PAGE, type: q.type, customerUuid: q.customerUuid, waitS: q.wait ?? 0 },
        );
      },
    );

    app.get(
      '/v1/events/:id',
      {
        schema: {
          ...operation('getEvent', 'query'),
          tags: ['events'],
          summary: 'One event with its deliveries',
          params: eventParams,
          response: { 200: eventSchema, ...errors },
        },
      },
      async (request) => {
        const row = await readEvent(db, request.params.id, keys());
        if (!row) throw notFound(`no event ${request.params.id}`);
        return eventView(row);
      },
    );

    app.post(
      '/v1/events/:id/redeliver',
      {
        schema: {
          ...operation('redeliverEvent', 'query'),
          tags: ['events'],
          summary: 'Queue one event again for every configured URL, even where it was delivered',
          params: eventParams,
          response: { 202: queuedView, ...errors },
        },
      },
      async (request, reply) => {
        const queued = await redeliverEvent(db, request.params.id, endpoints.targets(), deps.clock());
        if (queued === undefined) throw notFound(`no event ${request.params.id}`);
        worker?.wake();
        return reply.code(202).send({ queued });
      },
    );

    app.post(
      '/v1/events/redeliver',
      {
        schema: {
          ...operation('redeliverDeadEvents', 'query'),
          tags: ['events'],
          summary: 'Queue again every dead (or delivered) delivery of events created in [since, until), to every endpoint or one, of every type or one',
          description:
            'Each endpoint only for the types it receives; due at once, with a fresh retry horizon. 404 not_found: no endpoint endpointId that this instance sends to.',
          body: bulkRedeliverBody,
          response: { 202: queuedView, ...errors },
        },
      },
      async (request, reply) => {
        const { status, since, until, endpointId, type } = request.body;
        const targets = endpoints.targets().filter((t) => endpointId === undefined || t.id === endpointId);
        if (endpointId !== undefined && targets.length === 0) throw notFound(`no endpoint ${endpointId}`);
        const queued = await redeliverDeliveries(db, { status, since, until, type }, targets, deps.clock());
        request.log.info({ queued, status, since, until, endpoint: endpointId, type }, 'event deliveries queued again');
        worker?.wake();
        return reply.code(202).send({ queued });
      },
    );
  };
