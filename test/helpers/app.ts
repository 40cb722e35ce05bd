import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { Test } from 'tap';
import { type AppDeps, buildApp, type Clock } from '../../src/app.js';
import { type Config, loadConfig } from '../../src/config/config.js';
import type { DatabaseHandle } from '../../src/db/handle.js';
import type { BearerTokenSource } from '../../src/provider/token-source.js';
import { freshDatabase } from './database.js';
import { captureLogs, type LogCapture } from './logs.js';
import { checkAnswersAgainstDocument } from './openapi.js';
import { timed } from './teardown.js';
import { startTracing, type Tracing } from '../../src/tracing/sdk.js';

export const TEST_PARTNER_TOKEN = 'T'.repeat(32) + '0123456789abcdefghijklmnopqrstuv';
export const TEST_CPF_HASH_KEY = 'test-cpf-hash-key-0123456789abcdef';

/** The environment of a gateway child process (startProcess) on a real database, at a free port. */
export function gatewayProcessEnv(databaseUrl: string): Record<string, string> {
  return {
    DATABASE_URL: databaseUrl,
    HOST: '127.0.0.1',
    PORT: '0',
    PROVIDER_BASE_URL: 'http://127.0.0.1:9',
    PARTNER_TOKEN: TEST_PARTNER_TOKEN,
    CPF_HASH_KEY: TEST_CPF_HASH_KEY,
  };
}

/** Configuration as the gateway would parse it, from test defaults plus the given variables. */
export function testConfig(env: Record<string, string | undefined> = {}): Readonly<Config> {
  return loadConfig({
    NODE_ENV: 'test',
    PROVIDER_BASE_URL: 'http://127.0.0.1:9',
    PARTNER_TOKEN: TEST_PARTNER_TOKEN,
    CPF_HASH_KEY: TEST_CPF_HASH_KEY,
    UPSTREAM_TIMEOUT_MS: '2000',
    ...env,
  });
}

export interface TestApp {
  app: FastifyInstance;
  database: DatabaseHandle;
  logs: LogCapture;
  config: Readonly<Config>;
  /** Started, as server.ts starts it, when the env configures tracing (OTEL_*); shut down at teardown. */
  tracing: Tracing | undefined;
}

export interface TestAppOptions {
  env?: Record<string, string | undefined>;
  /** Share a database (e.g. a second instance); default: a fresh one. */
  database?: DatabaseHandle;
  clock?: Clock;
  tokenSource?: BearerTokenSource;
  logs?: LogCapture;
  serverTimeouts?: AppDeps['serverTimeouts'];
}

/** The gateway on a real, fresh database, with captured logs; closed at teardown. */
export async function buildTestApp(t: Test, options: TestAppOptions = {}): Promise<TestApp> {
  const config = testConfig(options.env);
  const database = options.database ?? (await freshDatabase(t));
  const logs = options.logs ?? captureLogs();
  const deps: AppDeps = { config, database, logger: logs.logger };
  if (options.clock) deps.clock = options.clock;
  if (options.tokenSource) deps.tokenSource = options.tokenSource;
  if (options.serverTimeouts) deps.serverTimeouts = options.serverTimeouts;
  const tracing = config.tracing ? startTracing(config.tracing) : undefined;
  if (tracing) Object.assign(deps, { tracer: tracing.tracer, tracerRoots: tracing.roots });
  const app = await buildApp(deps);
  // Every answer of a documented route must match /docs/json (status, content type, body schema).
  checkAnswersAgainstDocument(t, app);
  t.teardown(() =>
    timed('app.close()', async () => {
      await app.close();
      await tracing?.shutdown(1000);
    }),
  );
  return { app, database, logs, config, tracing };
}

/** Listens on 127.0.0.1 at a free port (all of 127/8 reaches it) and returns its base URL. */
export async function listen(app: FastifyInstance, host = '127.0.0.1'): Promise<string> {
  await app.listen({ host, port: 0 });
  const { port } = app.server.address() as AddressInfo;
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}
