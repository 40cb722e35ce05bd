import type { FastifyRequest, FastifySchemaCompiler, FastifySerializerCompiler } from 'fastify';
import { type FastifyPluginAsyncZod, serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import { allowlistGuard } from '../access/guards.js';
import type { Config } from '../config/config.js';
import { operation } from '../http/openapi.js';
import { traceOf } from '../tracing/server-spans.js';
import { metricOutcomeOfStatus, type SubmitMetricOutcome } from './metrics.js';
import {
  acceptedSchema,
  idempotencyKeySchema,
  prefersAsync,
  queuedSchema,
  submitBodySchema,
  submitHeadersSchema,
  submitResponses,
} from './schemas.js';
import type { Submissions } from './service.js';

const METRIC_OUTCOME = Symbol('submitMetricOutcome');
type WithMetricOutcome = FastifyRequest & { [METRIC_OUTCOME]: SubmitMetricOutcome | null };

/** The 202's fields in the schemas' order (submitted or queued): a replay read back from jsonb has its keys reordered. */
const ACCEPTED_FIELDS = [...new Set([...Object.keys(acceptedSchema.shape), ...Object.keys(queuedSchema.shape)])];

/**
 * A 202 is built by the submitter from our own values (or replayed as it was stored, from the same
 * builder) and stringified with the schema's fields, in its order, without a zod encode (~2 µs
 * per submit). Every other status goes through its zod schema.
 */
const builtAnswers: FastifySerializerCompiler<unknown> = (route) =>
  route.httpStatus === '202'
    ? (data) => JSON.stringify(data, ACCEPTED_FIELDS)
    : serializerCompiler(route as Parameters<typeof serializerCompiler>[0]);

/**
 * The headers' schema names one header, Idempotency-Key; a zod parse of the whole header object
 * copies every header on every submit. The key alone is checked here, and only a refusal runs the
 * full schema (for the contract's validation_failed body).
 */
const headersOnlyKey: FastifySchemaCompiler<unknown> = (route) => {
  const full = validatorCompiler(route as Parameters<typeof validatorCompiler>[0]);
  if (route.httpPart !== 'headers') return full;
  return (headers: unknown) => {
    const key = (headers as Record<string, unknown>)['idempotency-key'];
    return key === undefined || idempotencyKeySchema.safeParse(key).success ? { value: headers } : full(headers);
  };
};

export const submissionRoutes =
  (config: Pick<Config, 'submitAllowedIps' | 'customerUuidAllowCpf'>, submissions: Pick<Submissions, 'submit' | 'metrics'>): FastifyPluginAsyncZod =>
  async (app) => {
    const { submit, metrics } = submissions;
    // Answers the handler produced carry their metric outcome; the rest (400, 403, 413, 503) are named by status.
    // A decorated field, not a WeakMap: a weak entry per submit is extra work for the garbage collector.
    app.decorateRequest(METRIC_OUTCOME, null);

    app.post(
      '/v1/underwritings',
      {
        onRequest: allowlistGuard('submit', config.submitAllowedIps),
        onResponse: (request, reply, done) => {
          metrics.answered((request as WithMetricOutcome)[METRIC_OUTCOME] ?? metricOutcomeOfStatus(reply.statusCode));
          done();
        },
        schema: {
          ...operation('submitUnderwriting', 'open'),
          tags: ['underwritings'],
          summary: 'Submit an underwriting request to the provider',
          description:
            'Validates and stores the request (status submitting), then forwards it to the provider with the partner token. ' +
            'With `Prefer: respond-async` it is stored as queued and answered 202 at once; the gateway forwards it when the ' +
            "provider's pace allows (docs/provider-pacing.md).",
          headers: submitHeadersSchema,
          body: submitBodySchema(config.customerUuidAllowCpf),
          response: submitResponses,
        },
        validatorCompiler: headersOnlyKey,
        serializerCompiler: builtAnswers,
      },
      async (request, reply) => {
        const origin = { requestId: request.id, trace: traceOf(request) };
        const mode = prefersAsync(request.headers.prefer) ? 'async' : 'sync';
        const answer = await submit(request.body, request.headers['idempotency-key'], request.log, origin, mode);
        (request as WithMetricOutcome)[METRIC_OUTCOME] = answer.metricOutcome;
        if (answer.replayed) void reply.header('idempotent-replayed', 'true');
        if (answer.statusCode === 202 && answer.body.status === 'queued') void reply.header('preference-applied', 'respond-async');
        if (answer.retryAfterS !== undefined) void reply.header('retry-after', String(answer.retryAfterS));
        // Stored answers are replayed verbatim; their shape is the route's response schema for that status.
        return reply.code(answer.statusCode as 202).send(answer.body as never);
      },
    );
  };
