import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { allowlistGuard, partnerTokenGuard } from '../access/guards.js';
import { errorSchema, validationErrorSchema } from '../http/errors.js';
import { customerUuidSchema, underwritingRequestSchema, type UnderwritingResult, UNDERWRITINGS_PATH } from '../provider/schemas.js';
import type { SandboxConfig } from './config.js';
import type { CallbackDelivery } from './delivery.js';
import type { FaultState } from './faults.js';
import { underwrite } from './scenarios.js';

/** The provider's immediate answer is "not shown"; the simulator assumes 202 with this body. */
const acceptedSchema = z.object({ customerUuid: customerUuidSchema, status: z.literal('accepted') });

export interface UnderwritingDeps {
  config: Readonly<SandboxConfig>;
  delivery: CallbackDelivery;
  clock: () => Date;
  faults: FaultState;
}

const arrivedAt = new WeakMap<object, number>();

/** POST UNDERWRITINGS_PATH: accept, then call back after the delay. */
export const underwritingRoutes =
  ({ config, delivery, clock, faults }: UnderwritingDeps): FastifyPluginAsyncZod =>
  async (app) => {
    app.post(
      UNDERWRITINGS_PATH,
      {
        // Both checks run before the body is read, as the real edge would refuse the connection early.
        onRequest: [
          // A call counts in the second it arrived, not the one its body was read in.
          (request, _reply, done) => {
            arrivedAt.set(request, Date.now());
            done();
          },
          allowlistGuard('sandbox', config.allowedIps, 'sandbox: refused: address not in the allowlist'),
          partnerTokenGuard(config.partnerToken),
        ],
        schema: {
          body: underwritingRequestSchema,
          response: {
            202: acceptedSchema,
            400: validationErrorSchema,
            401: errorSchema,
            403: errorSchema,
            429: errorSchema,
            503: errorSchema,
          },
        },
      },
      async (request, reply) => {
        const admission = faults.admit(request.body.customerUuid, arrivedAt.get(request) ?? Date.now());
        if (admission.answer === 429 || admission.answer === 503) {
          // Refused before anything is run: the provider did not take it.
          const [error, message] =
            admission.answer === 429 ? ['rate_limited', 'sandbox: too many requests'] : ['unavailable', 'sandbox: service unavailable'];
          return reply.code(admission.answer).header('retry-after', String(admission.retryAfterS)).send({ error, message });
        }
        const started = clock();
        const response = underwrite(request.body, config.scenarioCpfs);
        const { customerUuid } = request.body;
        // Stored before the 202, as a provider that has accepted a request delivers its result even after a restart.
        await delivery.deliverLater({ customerUuid, started: started.toISOString(), serviceType: 'CREDIT_SCORE', response }, config.delayMs);
        if (admission.answer === 'hang') {
          // Received and run (the callback will come), never answered: the caller's timeout decides.
          request.log.info({ customerUuid }, 'sandbox: underwriting accepted, answer withheld (fault injection)');
          reply.hijack();
          faults.hold(request.raw.socket);
          return reply;
        }
        request.log.info({ customerUuid, delayMs: config.delayMs }, 'sandbox: underwriting accepted');
        return reply.code(202).send({ customerUuid, status: 'accepted' as const });
      },
    );
  };
