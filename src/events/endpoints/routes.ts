import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { guardRoutes, presentedBearer, type RouteAccess } from '../../access/guards.js';
import { type Actor, keyFingerprint } from '../../audit/trail.js';
import { errorSchema, guardedRouteErrors } from '../../http/errors.js';
import { operation } from '../../http/openapi.js';
import {
  createdEndpointView,
  endpointBody,
  endpointListView,
  endpointParams,
  endpointPatch,
  endpointView,
  replayBody,
  replayedView,
  rotateBody,
  secretView,
} from './schemas.js';
import type { EndpointService } from './service.js';

const bodyErrors = { 413: errorSchema, 415: errorSchema };
const notFound = { 404: errorSchema.describe('not_found: no such endpoint') };
const managed = { 409: errorSchema.describe('managed_by_config: the endpoint comes from EVENT_WEBHOOK_URLS') };
const tags = ['endpoints'];

/** The admin key the guard accepted, by its fingerprint. */
const actorOf = (request: FastifyRequest): Actor => keyFingerprint(presentedBearer(request) ?? '');

/** /v1/endpoints: the receivers of pushed events, managed at runtime (query allowlist and an admin key). */
export const endpointRoutes =
  (access: RouteAccess, service: EndpointService): FastifyPluginAsyncZod =>
  async (app) => {
    guardRoutes(app, 'admin', access);

    app.post(
      '/v1/endpoints',
      {
        schema: {
          ...operation('createEndpoint', 'admin'),
          tags,
          summary: 'Adds a receiver of pushed events; its secret is shown only in this answer',
          description: 'It receives every event recorded from now on (replay gives it the past). Audited.',
          body: endpointBody,
          response: { 201: createdEndpointView, ...guardedRouteErrors, ...bodyErrors },
        },
      },
      async (request, reply) => reply.code(201).send(await service.create(request.body, actorOf(request))),
    );

    app.get(
      '/v1/endpoints',
      {
        schema: {
          ...operation('listEndpoints', 'admin'),
          tags,
          summary: 'Every endpoint (managed through the API, or configured by EVENT_WEBHOOK_URLS), with delivery figures',
          response: { 200: endpointListView, ...guardedRouteErrors },
        },
      },
      async () => ({ items: await service.list() }),
    );

    app.get(
      '/v1/endpoints/:id',
      {
        schema: {
          ...operation('getEndpoint', 'admin'),
          tags,
          summary: 'One endpoint, with delivery figures; never its secret',
          params: endpointParams,
          response: { 200: endpointView, ...guardedRouteErrors, ...notFound },
        },
      },
      async (request) => service.read(request.params.id),
    );

    app.patch(
      '/v1/endpoints/:id',
      {
        schema: {
          ...operation('updateEndpoint', 'admin'),
          tags,
          summary: 'Changes url, description, types, rateLimitPerS, maxInFlight or status (active, paused)',
          description: 'Made active again (from paused or disabled), its waiting deliveries resume in order, each with a fresh retry horizon. Audited.',
          params: endpointParams,
          body: endpointPatch,
          response: { 200: endpointView, ...guardedRouteErrors, ...bodyErrors, ...notFound, ...managed },
        },
      },
      async (request) => service.update(request.params.id, request.body, actorOf(request)),
    );

    app.delete(
      '/v1/endpoints/:id',
      {
        schema: {
          ...operation('deleteEndpoint', 'admin'),
          tags,
          summary: 'Removes an endpoint; its pending deliveries end dead (lastError endpoint_deleted)',
          description: 'Audited.',
          params: endpointParams,
          response: { 204: z.null().describe('No content'), ...guardedRouteErrors, ...notFound, ...managed },
        },
      },
      async (request, reply) => {
        const ended = await service.remove(request.params.id, actorOf(request));
        request.log.info({ endpoint: request.params.id, deliveriesEnded: ended }, 'event endpoint deleted');
        // No payload at all: a serialized null would be a body the document (no content) does not allow.
        return reply.code(204).send(undefined as never);
      },
    );

    app.post(
      '/v1/endpoints/:id/rotate-secret',
      {
        schema: {
          ...operation('rotateEndpointSecret', 'admin'),
          tags,
          summary: 'A new signing secret, shown only here; the previous one keeps signing beside it until expireOldAfterS',
          description: 'During the overlap webhook-signature carries two v1, entries. Audited.',
          params: endpointParams,
          body: rotateBody,
          response: { 200: secretView, ...guardedRouteErrors, ...bodyErrors, ...notFound, ...managed },
        },
      },
      async (request) => ({ secret: await service.rotate(request.params.id, request.body?.expireOldAfterS, actorOf(request)) }),
    );

    app.post(
      '/v1/endpoints/:id/replay',
      {
        schema: {
          ...operation('replayToEndpoint', 'admin'),
          tags,
          summary: 'Queues for this endpoint every event from a time (since) or after a feed cursor (after), in order',
          description: 'Only the types it receives; delivered ones are sent again. Audited.',
          params: endpointParams,
          body: replayBody,
          response: { 202: replayedView, ...guardedRouteErrors, ...bodyErrors, ...notFound },
        },
      },
      async (request, reply) => reply.code(202).send({ queued: await service.replay(request.params.id, request.body, actorOf(request)) }),
    );
  };
