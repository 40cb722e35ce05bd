import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { addressMatcher } from '../access/addresses.js';
import { secretMatches } from '../access/guards.js';
import { errorBody, forbidden, unauthorized } from '../errors.js';
import { customerUuidSchema, underwritingRequestSchema } from '../provider/schemas.js';
import type { SandboxConfig } from './config.js';
import type { CallbackDelivery } from './delivery.js';
import { underwrite } from './scenarios.js';

const PARTNER_TOKEN_FORMAT = /^[A-Za-z0-9]{64}$/;

const errorSchema = z.object({ error: z.string(), message: z.string() });
type ErrorBody = z.infer<typeof errorSchema>;
/** The provider's immediate answer is "not shown"; the simulator assumes 202 with this body. */
const acceptedSchema = z.object({ customerUuid: customerUuidSchema, status: z.literal('accepted') });

export interface UnderwritingDeps {
  config: Readonly<SandboxConfig>;
  delivery: CallbackDelivery;
  clock: () => Date;
}

/** POST /api/partner/credit/cards/underwritings: accept, then call back after the delay. */
export const underwritingRoutes =
  ({ config, delivery, clock }: UnderwritingDeps): FastifyPluginAsyncZod =>
  async (app) => {
    const allowed = addressMatcher(config.allowedIps);

    app.post(
      '/api/partner/credit/cards/underwritings',
      {
        // Both checks run before the body is read, as the real edge would refuse the connection early.
        onRequest: (request, reply, done) => {
          if (!allowed(request.ip)) {
            request.log.warn({ client: request.ip }, 'sandbox: refused: address not in the allowlist');
            return void reply.code(403).send(errorBody(forbidden()) as ErrorBody);
          }
          const presented = request.headers['x-partner-auth'];
          const token = typeof presented === 'string' ? presented : undefined;
          if (!token || !PARTNER_TOKEN_FORMAT.test(token) || !secretMatches(token, [config.partnerToken])) {
            request.log.warn('sandbox: refused: missing or wrong X-Partner-Auth');
            return void reply.code(401).send(errorBody(unauthorized('missing or wrong X-Partner-Auth')) as ErrorBody);
          }
          done();
        },
        schema: {
          body: underwritingRequestSchema,
          response: { 202: acceptedSchema, 400: errorSchema.extend({ issues: z.array(z.object({ path: z.string(), message: z.string() })) }), 401: errorSchema, 403: errorSchema },
        },
      },
      async (request, reply) => {
        const started = clock();
        const response = underwrite(request.body, config.scenarioCpfs);
        const { customerUuid } = request.body;
        // Stored before the 202, as a provider that has accepted a request delivers its result even after a restart.
        await delivery.deliverLater({ customerUuid, started: started.toISOString(), serviceType: 'CREDIT_SCORE', response }, config.delayMs);
        request.log.info({ customerUuid, delayMs: config.delayMs }, 'sandbox: underwriting accepted');
        return reply.code(202).send({ customerUuid, status: 'accepted' as const });
      },
    );
  };
