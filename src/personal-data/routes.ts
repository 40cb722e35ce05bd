import type { FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { guardRoutes, presentedBearer, type RouteAccess } from '../access/guards.js';
import { type Actor, keyFingerprint, type SubjectRef } from '../audit/trail.js';
import { errorSchema, guardedRouteErrors } from '../http/errors.js';
import { operation } from '../http/openapi.js';
import { windowRule } from '../http/query.js';
import {
  auditPageView,
  auditQuery,
  erasedView,
  exportView,
  type SubjectBody,
  subjectBody,
} from './schemas.js';
import type { PersonalDataService } from './service.js';

// The guards' 403 also when ADMIN_API_KEYS is not set (the routes are disabled); the bodies' 413 and 415 as on every JSON route.
const bodyErrors = { 413: errorSchema, 415: errorSchema };

const subjectRef = (body: SubjectBody): SubjectRef =>
  body.cpf !== undefined ? { cpf: body.cpf } : { customerUuid: body.customerUuid! };

/** The admin key the guard accepted, by its fingerprint. */
const actorOf = (request: FastifyRequest): Actor => keyFingerprint(presentedBearer(request) ?? '');

/** POST /v1/personal-data/export and /erase, GET /v1/audit: query allowlist and an admin key. */
export const personalDataRoutes =
  (access: RouteAccess, service: PersonalDataService): FastifyPluginAsyncZod =>
  async (app) => {
    guardRoutes(app, 'admin', access);

    app.post(
      '/v1/personal-data/export',
      {
        schema: {
          ...operation('exportPersonalData', 'admin'),
          tags: ['personal data'],
          summary: 'Everything stored about a data subject, by CPF or customerUuid; never the full CPF',
          description:
            'By CPF: every request stored with it (under any CPF_HASH_KEY) and everything of the customerUuids those requests carry. Audited.',
          body: subjectBody,
          response: { 200: exportView, ...guardedRouteErrors, ...bodyErrors, 404: errorSchema.describe('not_found: nothing stored about this subject') },
        },
      },
      async (request) => service.exportSubject(subjectRef(request.body), actorOf(request)),
    );

    app.post(
      '/v1/personal-data/erase',
      {
        schema: {
          ...operation('erasePersonalData', 'admin'),
          tags: ['personal data'],
          summary: 'Deletes every request, callback, event, delivery and idempotency key of a data subject',
          description:
            'One transaction; 409 in_flight, nothing erased, while one of its requests awaits a callback. The audit entry stays (a keyed hash, no personal data).',
          body: subjectBody,
          response: { 200: erasedView, ...guardedRouteErrors, ...bodyErrors, 409: errorSchema.describe('in_flight: a request of the subject awaits its callback; nothing erased') },
        },
      },
      async (request) => {
        const counts = await service.eraseSubject(subjectRef(request.body), actorOf(request));
        request.log.info({ erased: counts }, 'personal data erased');
        return { erased: { requests: counts.requests, callbacks: counts.callbacks, events: counts.events } };
      },
    );

    app.get(
      '/v1/audit',
      {
        schema: {
          ...operation('listAuditEntries', 'admin'),
          tags: ['personal data'],
          summary: 'The audit trail of lookups by CPF, exports and erasures, newest first',
          description: windowRule('at'),
          querystring: auditQuery,
          response: { 200: auditPageView, ...guardedRouteErrors },
        },
      },
      async (request) => {
        const { since, until, action, limit, cursor } = request.query;
        return service.auditPage({ since, until, action }, limit, cursor);
      },
    );
  };
