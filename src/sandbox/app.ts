import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { serializerCompiler, validatorCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { ConfigError, listenError } from '../config/config-error.js';
import { BODY_LIMIT_BYTES } from '../deps.js';
import { installErrorHandler } from '../http/errors.js';
import type { SandboxConfig } from './config.js';
import { type CallbackDelivery, callbackDelivery, DEFAULT_RETRY_POLICY, type RetryPolicy } from './delivery.js';
import { faultRoutes, faultState, NO_FAULTS } from './faults.js';
import { filePendingStore, memoryPendingStore } from './pending.js';
import { createTokenSigner, tokenRoutes } from './tokens.js';
import { underwritingRoutes } from './underwritings.js';

export interface SandboxDeps {
  logger?: FastifyBaseLogger;
  clock?: () => Date;
  /** Where results go, read at delivery time (sandbox mode learns it after the gateway listens). */
  callbackUrl?: () => string | undefined;
  retry?: Partial<RetryPolicy>;
  /** Set: deliveries not yet made are kept in this file and survive a restart (see resume). */
  pendingFile?: string;
  /** Receives the delivery service, whose resume() schedules what a previous run left pending. */
  onDeliveries?: (delivery: CallbackDelivery) => void;
}

/** The provider simulator as its own Fastify app; never listens (server.ts and mode.ts do). */
export async function buildSandboxApp(config: Readonly<SandboxConfig>, deps: SandboxDeps = {}): Promise<FastifyInstance> {
  const app = Fastify({
    ...(deps.logger ? { loggerInstance: deps.logger } : { logger: false }),
    // Its allowlist judges the TCP peer: the simulator sits behind no proxy.
    trustProxy: false,
    bodyLimit: BODY_LIMIT_BYTES,
  }).withTypeProvider<ZodTypeProvider>();
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  installErrorHandler(app);

  const clock = deps.clock ?? (() => new Date());
  const delivery = callbackDelivery(
    deps.callbackUrl ?? (() => config.callbackUrl),
    app.log,
    { ...DEFAULT_RETRY_POLICY, ...deps.retry },
    deps.pendingFile === undefined ? memoryPendingStore() : filePendingStore(deps.pendingFile),
    clock,
  );
  app.addHook('onClose', async () => delivery.close());
  deps.onDeliveries?.(delivery);

  app.get('/healthz', { schema: { response: { 200: z.object({ status: z.string() }) } } }, async () => ({ status: 'ok' }));
  await app.register(tokenRoutes(config, await createTokenSigner()));
  const faults = faultState(config.faults ?? NO_FAULTS);
  // Never-answered calls hold their sockets: destroyed first, so that closing does not wait for them.
  app.addHook('preClose', (done) => {
    faults.close();
    done();
  });
  await app.register(faultRoutes(faults, config.allowedIps));
  await app.register(underwritingRoutes({ config, delivery, clock, faults }));
  return app;
}

/** True for listenSandbox's error when the port is taken. */
export function addressInUse(err: unknown): boolean {
  return err instanceof ConfigError && err.code === 'EADDRINUSE';
}

/** Listens at SANDBOX_HOST:SANDBOX_PORT; a taken or unusable address becomes a ConfigError naming them. */
export async function listenSandbox(app: FastifyInstance, config: Pick<SandboxConfig, 'host' | 'port'>): Promise<void> {
  await app
    .listen({
      host: config.host,
      port: config.port,
      listenTextResolver: (address) => `sandbox provider listening at ${address}`,
    })
    .catch((err: unknown) => {
      throw listenError(err, { host: 'SANDBOX_HOST', port: 'SANDBOX_PORT' }, config);
    });
}
