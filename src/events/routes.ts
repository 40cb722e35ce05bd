import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { guardRoutes, type RouteAccess } from '../access/guards.js';
import { abandonedBy } from '../http/abandoned.js';
import { errorSchema, guardedRouteErrors } from '../http/errors.js';
import { operation } from '../http/openapi.js';
import { WINDOW_ORDER_RULE } from '../http/query.js';
import {
  bulkRedeliverBody,
  DEFAULT_FEED_PAGE,
  eventParams,
  eventView as eventSchema,
  feedQuery,
  feedView,
  queuedView,
} from './schemas.js';
import type { EventService } from './service.js';

const errors = { ...guardedRouteErrors, 404: errorSchema };

/** Outcome events: the feed and redelivery routes (query allowlist and keys). */
export const eventRoutes =
  (access: RouteAccess, events: EventService): FastifyPluginAsyncZod =>
  async (app) => {
    guardRoutes(app, 'query', access);

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
      async (request, reply) => {
        const q = request.query;
        const waitS = q.wait ?? 0;
        const abandoned = waitS > 0 ? abandonedBy(reply) : undefined;
        return events.feed({ after: q.after, limit: q.limit ?? DEFAULT_FEED_PAGE, type: q.type, customerUuid: q.customerUuid, waitS, abandoned });
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
      async (request) => events.event(request.params.id),
    );

    app.post(
      '/v1/events/:id/redeliver',
      {
        schema: {
          ...operation('redeliverEvent', 'query'),
          tags: ['events'],
          summary: 'Queue one event again for every endpoint that receives its type, even where it was delivered',
          params: eventParams,
          response: { 202: queuedView, ...errors },
        },
      },
      async (request, reply) => {
        const queued = await events.redeliverEvent(request.params.id);
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
          description: `Each endpoint only for the types it receives; due at once, with a fresh retry horizon. ${WINDOW_ORDER_RULE} 404 not_found: no endpoint endpointId that this instance sends to.`,
          body: bulkRedeliverBody,
          response: { 202: queuedView, ...errors },
        },
      },
      async (request, reply) => {
        const { status, since, until, endpointId, type } = request.body;
        const queued = await events.redeliverDeliveries({ status, since, until, type }, endpointId);
        request.log.info({ queued, status, since, until, endpoint: endpointId, type }, 'event deliveries queued again');
        return reply.code(202).send({ queued });
      },
    );
  };
