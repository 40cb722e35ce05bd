import type { FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { allowlistGuard } from '../access/guards.js';
import type { CapabilityDeps } from '../deps.js';
import { operation } from '../openapi.js';
import { underwritingRequestSchema } from '../provider/schemas.js';
import { createUnderwritingClient } from '../provider/underwriting-client.js';
import { outcomeOfStatus, type SubmitOutcome, submitMetrics } from './metrics.js';
import { submitHeadersSchema, submitResponses } from './schemas.js';
import { submitter } from './submit.js';

export const submissionRoutes =
  (deps: CapabilityDeps): FastifyPluginAsyncZod =>
  async (app) => {
    const { config } = deps;
    const metrics = submitMetrics(deps.registry);
    const client = createUnderwritingClient({
      baseUrl: config.providerBaseUrl,
      partnerToken: config.partnerToken,
      timeoutMs: config.upstreamTimeoutMs,
      tokenSource: deps.tokenSource,
      observe: metrics.upstream,
    });
    app.addHook('onClose', () => client.close());
    const submit = submitter({
      db: deps.database.db,
      client,
      clock: deps.clock,
      cpfHashKey: config.cpfHashKey,
      partnerToken: config.partnerToken,
      upstreamTimeoutMs: config.upstreamTimeoutMs,
    });
    // Answers the handler produced carry their outcome; the rest (400, 403, 413, 503) are named by status.
    const outcomes = new WeakMap<FastifyRequest, SubmitOutcome>();

    app.post(
      '/v1/underwritings',
      {
        onRequest: allowlistGuard('submit', config.submitAllowedIps),
        onResponse: (request, reply, done) => {
          metrics.outcome(outcomes.get(request) ?? outcomeOfStatus(reply.statusCode));
          done();
        },
        schema: {
          ...operation('submitUnderwriting', 'open'),
          tags: ['underwritings'],
          summary: 'Submit an underwriting request to the provider',
          description:
            'Validates and stores the request (status submitting), then forwards it to the provider with the partner token.',
          headers: submitHeadersSchema,
          body: underwritingRequestSchema,
          response: submitResponses,
        },
      },
      async (request, reply) => {
        const answer = await submit(request.body, request.headers['idempotency-key'], request.log);
        outcomes.set(request, answer.outcome);
        if (answer.replayed) void reply.header('idempotent-replayed', 'true');
        // Stored answers are replayed verbatim; their shape is the route's response schema for that status.
        return reply.code(answer.statusCode as 202).send(answer.body as never);
      },
    );
  };
