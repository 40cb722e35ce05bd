import type { AddressInfo } from 'node:net';
import { inspect } from 'node:util';
import { DiagLogLevel, diag } from '@opentelemetry/api';
import { buildApp } from './app.js';
import { commandLine } from './config/cli.js';
import { configOrExit, listenError, writeFatal } from './config/config-error.js';
import { unknownVariableWarnings } from './config/config-names.js';
import { configuredSecrets, loadConfig } from './config/config.js';
import { openDatabase } from './db/database.js';
import { migrateToLatest } from './db/migrator.js';
import { serverTimeoutWarning } from './db/pool-mode.js';
import { loadEnvFile } from './config/env-file.js';
import { createLogger, defaultLogFormat, logProcessWarnings } from './observability/logger.js';
import { scrubText } from './observability/scrub.js';
import { type SandboxMode, startSandboxMode } from './sandbox/mode.js';
import { otlpHeaderValues, startTracing } from './tracing/sdk.js';

/** In-flight requests get this long to finish after the drain; then the process exits anyway. */
const SHUTDOWN_GRACE_MS = 10_000;
/**
 * The last part of the grace: from then on, a query the database has left unanswered for
 * STUCK_QUERY_MS is given up (its request answered 503), checked every STUCK_CHECK_MS. Queries
 * time out only after 15 s, longer than the grace: without this, a request waiting on a database
 * that stopped answering got no answer at all, its connection cut by the exit.
 */
const LAST_CALL_MS = 2_500;
const STUCK_QUERY_MS = 1_000;
const STUCK_CHECK_MS = 250;
/** Of the grace, what the last spans get to reach the collector at shutdown. */
const TRACE_FLUSH_MS = 3_000;
/** The most of an OpenTelemetry message logged: an export error carries the collector's whole answer. */
const DIAG_MESSAGE_CHARS = 2_000;
/** How long the database has to answer its first query at start. */
const STARTUP_PING_MS = 10_000;

async function main(): Promise<void> {
  const args = commandLine({
    command: 'npm start (node dist/src/server.js)',
    summary: 'Starts the gateway: migrates the database (unless MIGRATE_ON_START=false) and serves HTTP until SIGTERM or SIGINT.',
  });
  if (args === undefined) return;
  const envFile = await configOrExit(() => loadEnvFile());
  let config = await configOrExit(() => loadConfig(), unknownVariableWarnings(process.env));
  // Configured secrets are scrubbed from every logged path and error message (a token pasted into a URL).
  const logFormat = config.logFormat ?? defaultLogFormat(config.nodeEnv, process.stdout.isTTY === true);
  const log = createLogger(config.logLevel, logFormat, 1, configuredSecrets(config));
  logProcessWarnings(log, logFormat, configuredSecrets(config));
  if (envFile.file !== undefined) log.info({ file: envFile.file, applied: envFile.applied, keptFromEnvironment: envFile.overridden }, 'read settings from an env file');
  for (const warning of unknownVariableWarnings(process.env)) log.warn(warning);
  if (config.cpfHashKeyIsDevelopmentDefault) {
    log.warn('CPF_HASH_KEY is not set: using the fixed development key; set a secret key before storing real CPFs');
  }

  const database = await openDatabase({
    databaseUrl: config.databaseUrl,
    poolMode: config.databasePoolMode,
    listenUrl: config.databaseListenUrl,
    dataDir: config.dataDir,
    onIdleError: (err) => log.warn({ err: { message: err.message } }, 'database connection lost'),
    // Once: the first query that shows it (the start's check can miss it when other clients share the pooler).
    onPoolModeMismatch: (err) => log.error({ code: (err.cause as { code?: string } | undefined)?.code }, err.message),
  });
  // A pool connects lazily: "opened" is said only once the database has answered (a missing one fails here).
  await database.ping(STARTUP_PING_MS).catch((err: unknown) => {
    throw new Error(`cannot use the database at DATABASE_URL: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  });
  // Behind a transaction pooler, DATABASE_POOL_MODE=session fails a share of every route's queries: refuse to start instead.
  await database.verifyPoolMode();
  if (database.poolMode === 'transaction') {
    const warning = await serverTimeoutWarning(database.db, database.queryTimeoutMs);
    if (warning) log.warn({ statementTimeoutMs: warning.statementTimeoutMs }, warning.message);
  }
  log.info({ engine: database.engine, dataDir: database.engine === 'pglite' ? config.dataDir : undefined }, 'database opened');
  if (config.migrateOnStart) {
    const applied = await migrateToLatest(database);
    if (applied.length > 0) log.info({ applied }, 'migrations applied');
  }

  let sandbox: SandboxMode | undefined;
  if (config.sandboxMode) {
    // A bad SANDBOX_* variable is a configuration error like any other: one line each, exit 1.
    const gatewayConfig = config;
    sandbox = await configOrExit(() => startSandboxMode(log, gatewayConfig));
    config = Object.freeze({ ...config, providerBaseUrl: sandbox.providerBaseUrl, partnerToken: sandbox.partnerToken });
  }

  // Off unless an OTLP endpoint is configured: then no SDK at all, and the gateway makes no span.
  const tracing = config.tracing ? startTracing(config.tracing) : undefined;
  if (config.tracing) {
    log.info({ protocol: config.tracing.protocol }, 'tracing: exporting spans over OTLP/HTTP');
    // The SDK says what goes wrong (a collector unreachable, spans dropped) through the API's diag.
    // An export error carries the collector's answer, which may echo the request's headers (its API key).
    const hidden = [...otlpHeaderValues(process.env), ...configuredSecrets(config)];
    // Every part: the SDK says what went wrong after its first ("Received Partial Success response:",
    // the collector's reason), and a component's logger puts only its own name first.
    const say = (...parts: unknown[]) => {
      const message = parts.map((p) => (typeof p === 'string' ? p : inspect(p, { depth: 3, breakLength: Infinity }))).join(' ');
      log.warn({ component: 'opentelemetry' }, scrubText(message, hidden, DIAG_MESSAGE_CHARS));
    };
    diag.setLogger({ error: say, warn: say, info: () => {}, debug: () => {}, verbose: () => {} }, DiagLogLevel.WARN);
  }
  let draining = false;
  const app = await buildApp({ config, database, logger: log, draining: () => draining, ...(tracing ? { tracer: tracing.tracer, tracerRoots: tracing.roots } : {}) });
  await configOrExit(() =>
    app.listen({ host: config.host, port: config.port }).catch((err: unknown) => {
      throw listenError(err, { host: 'HOST', port: 'PORT' }, config);
    }),
  );
  // As soon as it listens: a signal that comes while sandbox mode is still being wired stops it
  // cleanly instead of killing it.
  let stopping = false;
  let endDrain: (() => void) | undefined;
  const stop = async (signal: string): Promise<void> => {
    if (stopping) {
      // A second signal cuts the drain short; after the drain, it stops the process at once (as
      // before there was a drain: an impatient Ctrl-C).
      if (endDrain) return endDrain();
      log.warn({ signal }, 'second signal while shutting down: exiting now');
      process.exit(1);
    }
    stopping = true;
    if (config.shutdownDrainMs > 0) {
      // Load balancers see the instance unready and stop sending before the listener closes.
      draining = true;
      log.info({ signal, drainMs: config.shutdownDrainMs }, 'draining: /readyz answers 503, everything else is still served');
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, config.shutdownDrainMs);
        endDrain = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      endDrain = undefined;
    }
    log.info({ signal }, 'shutting down: finishing in-flight requests');
    setTimeout(() => {
      log.error('shutdown took too long; exiting');
      process.exit(1);
    }, SHUTDOWN_GRACE_MS).unref();
    setTimeout(() => {
      setInterval(() => {
        const aborted = database.abortStuckQueries?.(STUCK_QUERY_MS) ?? 0;
        if (aborted > 0) log.warn({ aborted }, 'shutting down: queries the database left unanswered are given up, so their requests get an answer (503) before the exit');
      }, STUCK_CHECK_MS).unref();
    }, SHUTDOWN_GRACE_MS - LAST_CALL_MS).unref();
    try {
      await app.close();
      await sandbox?.close();
      await database.close();
      // After everything that makes spans has stopped (deliveries in flight included): the last ones go out.
      await tracing?.shutdown(TRACE_FLUSH_MS);
      log.info('stopped');
      process.exit(0);
    } catch (err) {
      log.error({ err }, 'error while shutting down');
      process.exit(1);
    }
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));

  if (sandbox) {
    const { port } = app.server.address() as AddressInfo;
    const host = ['0.0.0.0', '::'].includes(config.host) ? '127.0.0.1' : config.host;
    const callbackHost = host.includes(':') ? `[${host}]` : host;
    await sandbox.setCallbackUrl(`http://${callbackHost}:${port}/v1/callbacks/underwriting`);
  }
}

main().catch((err: unknown) => {
  writeFatal([`underwriting-gateway failed to start: ${err instanceof Error ? err.message : String(err)}`]);
  process.exit(1);
});
