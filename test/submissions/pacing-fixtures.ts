import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import type { Test } from 'tap';
import type { DatabaseHandle } from '../../src/db/handle.js';
import type { Faults, SandboxStats } from '../../src/sandbox/faults.js';
import { buildTestApp, listen, TEST_PARTNER_TOKEN, type TestApp } from '../helpers/app.js';
import { type RunningSandbox, startSandbox } from '../sandbox/helpers.js';
import { validRequest } from './fixtures.js';

// Gateways and the sandbox over real HTTP: the sandbox is the provider, and delivers its callbacks
// to the first gateway. Used by the queued-submit and pacing tests.

export interface PacedSetup {
  sandbox: RunningSandbox;
  gateways: TestApp[];
  /** Sets the sandbox's faults at run time (POST /_sandbox/faults). */
  faults(change: Partial<Faults>): Promise<void>;
  stats(): Promise<SandboxStats>;
}

/**
 * The sandbox (callback delay 0 unless given) and `instances` gateways on one database, each
 * with the env given, all forwarding to the sandbox.
 */
export async function pacedSetup(
  t: Test,
  options: { instances?: number; env?: Record<string, string>; sandboxEnv?: Record<string, string>; database?: DatabaseHandle } = {},
): Promise<PacedSetup> {
  let callbackUrl: string | undefined;
  const sandbox = await startSandbox(t, { SANDBOX_PARTNER_TOKEN: TEST_PARTNER_TOKEN, ...options.sandboxEnv }, { callbackUrl: () => callbackUrl });
  const gateways: TestApp[] = [];
  for (let i = 0; i < (options.instances ?? 1); i++) {
    const database = options.database ?? gateways[0]?.database;
    const gw = await buildTestApp(t, { env: { PROVIDER_BASE_URL: sandbox.base, ...options.env }, ...(database ? { database } : {}) });
    gateways.push(gw);
  }
  callbackUrl = `${await listen(gateways[0]!.app)}/v1/callbacks/underwriting`;
  const control = (method: 'GET' | 'POST', url: string, body?: unknown) =>
    sandbox.app.inject({ method, url, ...(body === undefined ? {} : { payload: body as object }), remoteAddress: '127.0.0.1' });
  return {
    sandbox,
    gateways,
    faults: async (change) => {
      const res = await control('POST', '/_sandbox/faults', change);
      if (res.statusCode !== 200) throw new Error(`faults: ${res.statusCode} ${res.body}`);
    },
    stats: async () => (await control('GET', '/_sandbox/stats')).json() as SandboxStats,
  };
}

/** POST /v1/underwritings with Prefer: respond-async. */
export function submitAsync(app: FastifyInstance, customerUuid: string, headers: Record<string, string> = {}) {
  return app.inject({
    method: 'POST',
    url: '/v1/underwritings',
    headers: { 'content-type': 'application/json', prefer: 'respond-async', ...headers },
    payload: JSON.stringify(validRequest({ customerUuid })),
  });
}

/** The request's stored state. */
export async function requestOf(database: DatabaseHandle, customerUuid: string) {
  return database.db
    .selectFrom('underwriting_requests')
    .select(['id', 'status', 'upstream_status', 'upstream_error', 'forward_attempts', 'queued_body', 'queued_at', 'submitted_at'])
    .where('customer_uuid', '=', customerUuid)
    .orderBy('id', 'desc')
    .executeTakeFirst();
}

/**
 * Between the tests of a file that share a database: what an earlier test left queued is cancelled
 * (so no later forwarder sends it), and the provider's shared pace starts afresh (no hold, circuit closed).
 */
export async function resetQueue(database: DatabaseHandle): Promise<void> {
  await sql`update underwriting_requests set status = 'cancelled', queued_body = null where status = 'queued'`.execute(database.db);
  await sql`update provider_pacing set failures = 0, open_until = null, probe_until = null, hold_until = '-infinity', used = 0`.execute(database.db);
}

/** Holds every instance back, as a provider's long Retry-After would (holdPace(db, 0) lets them go again). */
export async function holdPace(database: DatabaseHandle, seconds: number): Promise<void> {
  await sql`update provider_pacing set hold_until = clock_timestamp() + make_interval(secs => ${seconds})`.execute(database.db);
}

/** Customers submitted more than once, as the sandbox counted what it received. */
export function twice(stats: SandboxStats): string[] {
  return Object.entries(stats.received)
    .filter(([, n]) => n > 1)
    .map(([c]) => c);
}

/** The event types recorded for a customer, oldest first. */
export async function eventTypes(database: DatabaseHandle, customerUuid: string): Promise<string[]> {
  const rows = await database.db.selectFrom('events').select('type').where('customer_uuid', '=', customerUuid).orderBy('id').execute();
  return rows.map((e) => e.type);
}

/** A port nothing listens on (connections are refused). */
export async function closedPort(): Promise<number> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
