import { randomUUID } from 'node:crypto';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { Tracer } from '@opentelemetry/api';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { serializerCompiler, validatorCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import { addressMatcher, forwardedAddressesOnly } from './access/addresses.js';
import { callbackRoutes } from './callbacks/routes.js';
import { campaignRoutes, UPLOAD_IDLE_MS } from './campaigns/routes.js';
import { notificationChannel } from './channels/channel.js';
import { RESULTS_CHANNEL } from './channels/names.js';
import { type Config, configuredSecrets } from './config/config.js';
import { composeServices } from './compose.js';
import { consoleRoutes } from './console/routes.js';
import { identifierHoldsCpf } from './cpf.js';
import type { DatabaseHandle } from './db/handle.js';
import { poolMetrics } from './db/metrics.js';
import { BODY_LIMIT_BYTES, type CapabilityDeps, type Clock } from './deps.js';
import { answerClientError, frameworkErrorReply, installErrorHandler } from './http/errors.js';
import { deliveries } from './events/delivery-plugin.js';
import { deliveryHandoff } from './events/handoff.js';
import { endpointRoutes } from './events/endpoints/routes.js';
import { eventRoutes } from './events/routes.js';
import { closeWhenIdle } from './http/closing.js';
import { QuietProbesLogController } from './http/request-logging.js';
import { ingestLoad } from './timing/ingest-load.js';
import { requestLoggerFactory } from './observability/logger.js';
import { createRegistry, instrumentRequests } from './observability/metrics.js';
import { swaggerOptions } from './http/openapi.js';
import { opsRoutes } from './ops/routes.js';
import { personalDataRoutes } from './personal-data/routes.js';
import type { BearerTokenSource } from './provider/token-source.js';
import { TokenClient } from './provider/token-client.js';
import { queryRoutes } from './queries/routes.js';
import { statsRoutes } from './stats/routes.js';
import { addSecurityHeaders, type SecurityHeaderOptions } from './http/security-headers.js';
import { submissionRoutes } from './submissions/routes.js';
import type { RootIds } from './tracing/root-ids.js';
import { traceRequests } from './tracing/server-spans.js';

export type { Clock } from './deps.js';

export interface AppDeps {
  config: Readonly<Config>;
  database: DatabaseHandle;
  /** A pino logger; tests pass one writing to a captured stream. Unset: no logging. */
  logger?: FastifyBaseLogger;
  clock?: Clock;
  /** Set when AUTH_URL/CLIENT_ID are configured: upstream calls then carry a bearer token too. */
  tokenSource?: BearerTokenSource;
  /** Set when tracing is on (server.ts starts the SDK; tests pass their own). Unset: no spans at all. */
  tracer?: Tracer;
  /** The tracer's reserved root ids (tracing/root-ids.ts); without them every server span begins on arrival. */
  tracerRoots?: RootIds;
  /** Tests shorten these; a deployment keeps SERVER_TIMEOUTS. */
  serverTimeouts?: Partial<ServerTimeouts>;
  /** True once shutdown has begun its drain: /readyz then answers 503 (server.ts, SHUTDOWN_DRAIN_MS). */
  draining?: () => boolean;
}

export interface ServerTimeouts {
  /** A client must have sent its request line and headers within this long of connecting (or of its previous request). */
  headersTimeoutMs: number;
  /** ...and its whole request, body included, within this long; a refused one too (408, then closed). */
  requestTimeoutMs: number;
  /** An idle keep-alive connection is closed after this long; above the usual load balancer idle timeout (60 s). */
  keepAliveTimeoutMs: number;
  /** How often Node checks the two bounds above: they hold to within this much. */
  checkIntervalMs: number;
  /** A campaign's upload, let past requestTimeoutMs, is answered 408 after this long without a byte of its body. */
  uploadIdleMs: number;
}

/** Slow clients (slowloris, a stalled body) are cut off: our bodies are at most 64 KiB, sent in well under a second. */
export const SERVER_TIMEOUTS: Readonly<ServerTimeouts> = Object.freeze({
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 72_000,
  checkIntervalMs: 1_000,
  uploadIdleMs: UPLOAD_IDLE_MS,
});

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/;

/**
 * Every answer is JSON, so the content security policy an API wants: load nothing, be framed by
 * no one (/docs sets its own, looser one for Swagger UI). Helmet's defaults for the rest.
 */
export const SECURITY_HEADER_OPTIONS = {
  contentSecurityPolicy: { useDefaults: false, directives: { defaultSrc: ["'none'"], frameAncestors: ["'none'"] } },
} satisfies SecurityHeaderOptions;

/** Builds the gateway; never listens (server.ts does, tests inject or listen on port 0). */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const { config } = deps;
  const trusted = addressMatcher(config.trustProxy);
  const secrets = configuredSecrets(config);
  const timeouts = { ...SERVER_TIMEOUTS, ...deps.serverTimeouts };
  const app = Fastify({
    ...(deps.logger
      ? { loggerInstance: deps.logger, childLoggerFactory: requestLoggerFactory, logController: new QuietProbesLogController() }
      : { logger: false }),
    // Only a peer in TRUST_PROXY may say who the client is; everyone else's X-Forwarded-For is ignored.
    trustProxy: config.trustProxy.length > 0 ? (address: string) => trusted(address) : false,
    bodyLimit: BODY_LIMIT_BYTES,
    // customerUuid may be 128 characters (Fastify's default of 100 would answer 414); longer is a 400.
    routerOptions: { maxParamLength: 256 },
    requestTimeout: timeouts.requestTimeoutMs,
    keepAliveTimeout: timeouts.keepAliveTimeoutMs,
    http: {
      headersTimeout: timeouts.headersTimeoutMs,
      requestTimeout: timeouts.requestTimeoutMs,
      connectionsCheckingInterval: timeouts.checkIntervalMs,
    },
    // What Fastify answers before any route runs, in the contract's error body too.
    frameworkErrors: frameworkErrorReply,
    clientErrorHandler: answerClientError,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      // An id holding a CPF (however separated) or one of our secrets (a key or token a client put there)
      // would be logged on every line, echoed, stored, forwarded and pushed: replaced, as a malformed one is.
      return typeof given === 'string' && REQUEST_ID.test(given) && !identifierHoldsCpf(given) && !secrets.some((s) => given.includes(s))
        ? given
        : randomUUID();
    },
  }).withTypeProvider<ZodTypeProvider>();
  if (config.trustProxy.length > 0) {
    // Before Fastify reads the request: a trusted proxy's X-Forwarded-For is believed only as far as it holds addresses.
    app.server.prependListener('request', (req) => {
      const forwarded = req.headers['x-forwarded-for'];
      if (typeof forwarded !== 'string') return;
      const kept = forwardedAddressesOnly(forwarded);
      if (kept === undefined) delete req.headers['x-forwarded-for'];
      else req.headers['x-forwarded-for'] = kept;
    });
  }

  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  installErrorHandler(app, secrets);
  // Bodies are JSON: JSON sent as text/plain is refused 415, not read as a string that then fails validation.
  app.removeContentTypeParser('text/plain');
  // An empty JSON body is no body: clients that send `Content-Type: application/json` on every call
  // (a DELETE, a redeliver) were refused 400 "Body cannot be empty" by the JSON parser. A route
  // that needs a body still refuses its absence (400); an empty campaign file keeps its type. With
  // neither Content-Length nor Transfer-Encoding there is no body either (curl -X DELETE -H ...).
  app.addHook('onRequest', (request, _reply, done) => {
    const { 'content-length': length, 'transfer-encoding': chunked } = request.headers;
    const empty = length === '0' || (length === undefined && chunked === undefined);
    if (empty && /^application\/json\b/i.test(request.headers['content-type'] ?? '')) delete request.headers['content-type'];
    done();
  });
  // Once closing, every answer closes its connection: a keep-alive client (a console tab, a
  // poller) would otherwise keep a connection that was busy as close began open for its whole
  // keep-alive timeout (72 s), and close (SIGTERM's shutdown) would wait for it past its grace.
  // Connections that hold no request (idle, or never used) are closed as soon as close begins.
  let closing = false;
  const connections = closeWhenIdle(app.server);
  app.addHook('preClose', (done) => {
    closing = true;
    connections.begin();
    done();
  });
  app.addHook('onSend', (request, reply, payload, done) => {
    reply.header('x-request-id', request.id);
    if (closing) reply.header('connection', 'close');
    done(null, payload);
  });

  const registry = createRegistry();
  instrumentRequests(app, registry);
  if (deps.tracer) traceRequests(app, deps.tracer, secrets, deps.tracerRoots);

  // @fastify/helmet's options are the source; the helmet it calls turns them into headers once, at
  // start (security-headers.ts). The plugin itself is not registered: even with `global: false` it
  // adds two hooks to every request (one async, building reply decorators), and nothing here
  // calls reply.helmet().
  addSecurityHeaders(app, SECURITY_HEADER_OPTIONS);
  await app.register(
    swagger,
    swaggerOptions(
      {
        title: 'underwriting-gateway',
        description: "Partner-side gateway for the provider's asynchronous credit-card underwriting API",
        version: '0.1.0',
      },
      [
        { name: 'underwritings', description: 'Submit requests and read outcomes' },
        { name: 'callbacks', description: "The provider's result callbacks" },
        { name: 'events', description: 'Outcome events: the feed, and redelivery of pushed events' },
        { name: 'operations', description: 'Health, readiness, metrics' },
        { name: 'personal data', description: 'LGPD: export, erasure and the audit trail (admin keys)' },
        { name: 'endpoints', description: 'Receivers of pushed events, managed at runtime (admin keys)' },
        { name: 'campaigns', description: 'Files of submits, queued and forwarded at the provider\'s pace; their progress and results' },
      ],
    ),
  );
  await app.register(swaggerUi, { routePrefix: '/docs', staticCSP: true });

  let tokenSource = deps.tokenSource;
  if (!tokenSource && config.tokenClient) {
    const client = new TokenClient({ config: config.tokenClient, registry, log: app.log, timeoutMs: config.upstreamTimeoutMs });
    app.addHook('onClose', async () => client.close());
    tokenSource = client;
  }
  const capabilityDeps: CapabilityDeps = {
    config,
    database: deps.database,
    clock: deps.clock ?? (() => new Date()),
    tokenSource,
    registry,
    results: notificationChannel(deps.database, RESULTS_CHANNEL, app.log),
    ingest: ingestLoad(),
    handoff: deliveryHandoff(),
    tracer: deps.tracer,
  };
  // Before every gauge that queries: a scrape collects in this order, so the pool is read before the scrape's own queries take connections.
  poolMetrics(registry, deps.database);
  await app.register(opsRoutes({ database: deps.database, registry, draining: deps.draining ?? (() => false) }));
  const services = composeServices(capabilityDeps, app.log);
  await app.register(services.lifecycle);
  // Before the capabilities: plugins close in reverse order, so the last announcements still go out.
  await app.register(capabilityDeps.results.plugin);
  // Registered before the routes: plugins close in reverse order, so the forwarder stops (and its
  // forwards in flight end) after the routes' last answers.
  await app.register(services.submissions.worker);
  await app.register(submissionRoutes(config, services.submissions));
  await app.register(campaignRoutes(config, services.campaigns, timeouts.uploadIdleMs));
  await app.register(callbackRoutes(config, services.callbacks));
  await app.register(queryRoutes(config, services.queries));
  await app.register(personalDataRoutes(config, services.personalData));
  await app.register(statsRoutes(config, services.stats));
  await app.register(services.retention);
  await app.register(services.statisticsClosing);
  await app.register(consoleRoutes({ config }));
  await app.register(deliveries(capabilityDeps, services.deliveries));
  await app.register(eventRoutes(config, services.events));
  await app.register(endpointRoutes(config, services.endpoints));
  return app;
}
