import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { allowlistGuard, partnerTokenGuard } from '../access/guards.js';
import { errorSchema, validationErrorSchema } from '../errors.js';
import { customerUuidSchema, underwritingRequestSchema, type UnderwritingResult, UNDERWRITINGS_PATH } from '../provider/schemas.js';
import type { SandboxConfig } from './config.js';
import type { CallbackDelivery } from './delivery.js';
import { underwrite } from './scenarios.js';

/** The provider's immediate answer is "not shown"; the simulator assumes 202 with this body. */
const acceptedSchema = z.object({ customerUuid: customerUuidSchema, status: z.literal('accepted') });

export interface UnderwritingDeps {
  config: Readonly<SandboxConfig>;
  delivery: CallbackDelivery;
  clock: () => Date;
}

/** POST UNDERWRITINGS_PATH: accept, then call back after the delay. */
export const underwritingRoutes =
  ({ config, delivery, clock }: UnderwritingDeps): FastifyPluginAsyncZod =>
  async (app) => {
    app.post(
      UNDERWRITINGS_PATH,
      {
        // Both checks run before the body is read, as the real edge would refuse the connection early.
        onRequest: [
          allowlistGuard('sandbox', config.allowedIps, 'sandbox: refused: address not in the allowlist'),
          partnerTokenGuard(config.partnerToken),
        ],
        schema: {
          body: underwritingRequestSchema,
          response: { 202: acceptedSchema, 400: validationErrorSchema, 401: errorSchema, 403: errorSchema },
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
