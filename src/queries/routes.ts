import type { FastifyRequest, FastifySerializerCompiler } from 'fastify';
import { type FastifyPluginAsyncZod, serializerCompiler } from 'fastify-type-provider-zod';
import { guardRoutes, presentedBearer } from '../access/guards.js';
import { type Actor, keyFingerprint, recordAudit, subjectHasher } from '../audit/trail.js';
import type { CapabilityDeps } from '../deps.js';
import { hashCpfUnderEvery } from '../cpf.js';
import { errorSchema, guardedRouteErrors, notFound } from '../http/errors.js';
import { operation } from '../http/openapi.js';
import { cursorCodec } from '../http/cursor.js';
import { queryMetrics } from './metrics.js';
import {
  customerParams,
  customerQuerystring,
  customerView,
  DEFAULT_PAGE,
  listQuery,
  lookupBody,
  lookupQuery,
  type PageView,
  pageView,
} from './schemas.js';
import { type ListFilter, readCustomer, readPage } from './sql.js';

/**
 * A 200 is built field by field from our own rows (sql.ts) and sent as it is: a zod parse of every
 * reply showed in GET one's CPU profile. Every other status goes through the zod schema.
 */
const builtViews: FastifySerializerCompiler<unknown> = (route) =>
  route.httpStatus === '200' ? (data) => JSON.stringify(data) : serializerCompiler(route as Parameters<typeof serializerCompiler>[0]);

export const queryRoutes =
  (deps: CapabilityDeps): FastifyPluginAsyncZod =>
  async (app) => {
    const { db } = deps.database;
    const metrics = queryMetrics(deps.registry);
    const cursors = cursorCodec(deps.config.cpfHashKey);
    const subjectOf = subjectHasher(deps.config.cpfHashKey);
    // Who looked: the API key by its fingerprint, or the peer when the query routes have no keys.
    const actorOf = (request: FastifyRequest): Actor =>
      deps.config.queryApiKeys.length > 0 ? keyFingerprint(presentedBearer(request) ?? '') : `peer:${request.ip}`;

    guardRoutes(app, 'query', deps.config);

    const page = async (filter: ListFilter, limit: number | undefined, cursor: string | undefined): Promise<PageView> => {
      const after = cursor === undefined ? undefined : cursors.decode(cursor);
      const { items, next } = await readPage(db, filter, after, limit ?? DEFAULT_PAGE);
      return { items, nextCursor: next ? cursors.encode(next) : null };
    };

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
      async (request) => {
        const { customerUuid } = request.params;
        return deps.results.wait(customerUuid, request.query.wait ?? 0, {
          read: async () => {
            const view = await readCustomer(db, customerUuid);
            if (!view) {
              // "lookup" is a valid customerUuid, so GET /v1/underwritings/lookup stays a customer read; but
              // when there is no such customer the caller almost surely meant the lookup by CPF.
              const hint = customerUuid === 'lookup' ? '; to find requests by CPF, POST /v1/underwritings/lookup with a JSON body {"cpf": "..."}' : '';
              throw notFound(`no underwriting request for customer ${customerUuid}${hint}`);
            }
            return view;
          },
          // Held until the newest request has a result (stored by any instance).
          ready: (view) => view.result !== null,
          onWaiting: (delta) => metrics.waiters.inc(delta),
        });
      },
    );

    app.get(
      '/v1/underwritings',
      {
        schema: {
          ...operation('listUnderwritings', 'query'),
          tags: ['underwritings'],
          summary: 'Requests, newest first, filtered and paged by cursor',
          description: 'since is inclusive and until exclusive, both on submittedAt.',
          querystring: listQuery,
          response: { 200: pageView, ...guardedRouteErrors },
        },
        serializerCompiler: builtViews,
      },
      async (request) => {
        const { status, decision, since, until, limit, cursor } = request.query;
        return page({ status, decision, since, until }, limit, cursor);
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
        const cpfHashes = hashCpfUnderEvery(cpf, deps.config.cpfHashKeys);
        const found = await page({ cpfHashes }, limit ?? request.query.limit, cursor ?? request.query.cursor);
        // No answer leaves without its audit entry: if it cannot be written, the lookup fails.
        await recordAudit(db, {
          at: deps.clock(),
          action: 'lookup',
          actor: actorOf(request),
          subject: subjectOf({ cpf }),
          counts: { requests: found.items.length },
        });
        return found;
      },
    );
  };
