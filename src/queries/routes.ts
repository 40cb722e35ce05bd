import type { FastifySerializerCompiler } from 'fastify';
import { type FastifyPluginAsyncZod, serializerCompiler } from 'fastify-type-provider-zod';
import { guardRoutes, presentedBearer, type RouteAccess } from '../access/guards.js';
import { abandonedBy } from '../http/abandoned.js';
import { errorSchema, guardedRouteErrors } from '../http/errors.js';
import { operation } from '../http/openapi.js';
import { windowRule } from '../http/query.js';
import {
  customerParams,
  customerQuerystring,
  customerView,
  listQuery,
  lookupBody,
  lookupQuery,
  pageView,
} from './schemas.js';
import type { QueryService } from './service.js';

/**
 * A 200 is built field by field from our own rows (sql.ts) and sent as it is: a zod parse of every
 * reply showed in GET one's CPU profile. Every other status goes through the zod schema.
 */
const builtViews: FastifySerializerCompiler<unknown> = (route) =>
  route.httpStatus === '200' ? (data) => JSON.stringify(data) : serializerCompiler(route as Parameters<typeof serializerCompiler>[0]);

export const queryRoutes =
  (access: RouteAccess, queries: QueryService): FastifyPluginAsyncZod =>
  async (app) => {
    guardRoutes(app, 'query', access);

    app.get(
      '/v1/underwritings/:customerUuid',
      {
        schema: {
          ...operation('getUnderwriting', 'query'),
          tags: ['underwritings'],
          summary: "One customer's newest request and result, its history and unmatched callbacks",
          description:
            'With ?wait=N (0-30 s), a request without a result yet holds the reply until its callback is stored (on any instance) or N seconds pass.',
          params: customerParams,
          querystring: customerQuerystring,
          response: {
            200: customerView,
            ...guardedRouteErrors,
            404: errorSchema.describe('not_found: no request for this customerUuid'),
            503: errorSchema.describe('storage_unavailable, or too_many_waiters: this instance holds its most long-polls'),
          },
        },
        serializerCompiler: builtViews,
      },
      async (request, reply) => {
        const waitS = request.query.wait ?? 0;
        return queries.customer(request.params.customerUuid, waitS, waitS > 0 ? abandonedBy(reply) : undefined);
      },
    );

    app.get(
      '/v1/underwritings',
      {
        schema: {
          ...operation('listUnderwritings', 'query'),
          tags: ['underwritings'],
          summary: 'Requests, newest first, filtered and paged by cursor',
          description: windowRule('submittedAt'),
          querystring: listQuery,
          response: { 200: pageView, ...guardedRouteErrors },
        },
        serializerCompiler: builtViews,
      },
      async (request) => {
        const { status, decision, since, until, limit, cursor } = request.query;
        return queries.list({ status, decision, since, until }, limit, cursor);
      },
    );

    app.post(
      '/v1/underwritings/lookup',
      {
        schema: {
          ...operation('lookupUnderwritings', 'query'),
          tags: ['underwritings'],
          summary: 'Requests for one CPF (sent in the body, never in a URL), paged like the list',
          description:
            'limit and cursor may be given in the body or the query string; the body wins. Matches under every CPF_HASH_KEY. Every lookup is audited.',
          querystring: lookupQuery,
          body: lookupBody,
          response: { 200: pageView, ...guardedRouteErrors, 413: errorSchema, 415: errorSchema },
        },
        serializerCompiler: builtViews,
      },
      async (request) => {
        const { cpf, limit, cursor } = request.body;
        return queries.lookup(cpf, limit ?? request.query.limit, cursor ?? request.query.cursor, { bearer: presentedBearer(request), ip: request.ip });
      },
    );
  };
