import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { guardRoutes, type RouteAccess } from '../access/guards.js';
import { guardedRouteErrors } from '../http/errors.js';
import { operation } from '../http/openapi.js';
import { WINDOW_ORDER_RULE } from '../http/query.js';
import { statsQuery, statsView, strayListQuery, strayPageView } from './schemas.js';
import type { StatsService } from './service.js';

/** Operations views: statistics and the callbacks that matched nothing or failed validation. Query allowlist and keys. */
export const statsRoutes =
  (access: RouteAccess, stats: StatsService): FastifyPluginAsyncZod =>
  async (app) => {
    guardRoutes(app, 'query', access);

    app.get(
      '/v1/stats',
      {
        schema: {
          ...operation('getStats', 'query'),
          tags: ['operations'],
          summary: 'Counts, decisions and turnaround per hour or day, and what stands now',
          description: `A bucket's request figures are about the requests submitted in it, as they stand now (a late callback moves one from expired to completed); its unmatched and invalid counts are callbacks that arrived in it. Buckets are whole UTC hours or days: since is rounded down and until up. Days purged by RETENTION_DAYS are read from the aggregates kept for them. ${WINDOW_ORDER_RULE} The same 400 when since, rounded down, is not before until (default: now), rounded up.`,
          querystring: statsQuery,
          response: { 200: statsView, ...guardedRouteErrors },
        },
      },
      async (request) => stats.read(request.query),
    );

    app.get(
      '/v1/callbacks',
      {
        schema: {
          ...operation('listStrayCallbacks', 'query'),
          tags: ['callbacks'],
          summary: 'Callbacks that matched no request or failed validation, newest first, paged by cursor',
          description: 'rawBody is the stored bytes as UTF-8 text with every CPF-like digit run (11+ digits, any separators) masked.',
          querystring: strayListQuery,
          response: { 200: strayPageView, ...guardedRouteErrors },
        },
      },
      async (request) => stats.strayCallbacks(request.query),
    );
  };
