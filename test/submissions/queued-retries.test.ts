import http from 'node:http';
import t from 'tap';
import { until } from '../helpers/until.js';
import { freshDatabase } from '../helpers/database.js';
import type { SandboxStats } from '../../src/sandbox/faults.js';
import { buildTestApp, TEST_PARTNER_TOKEN } from '../helpers/app.js';
import { startSandbox } from '../sandbox/helpers.js';
import { pacedSetup, closedPort, eventTypes, holdPace, requestOf, resetQueue, submitAsync, twice } from './pacing-fixtures.js';

// Queued submits when the provider fails: what is sent again and what is not, and in which order.




// One database for the file (each test has its own customers; resetQueue clears what the previous left): a fresh PGlite costs seconds.
const database = await freshDatabase(t);

t.test('a provider that refuses connections: the request stays queued, and is forwarded once when the provider is up', async (t) => {
  await resetQueue(database);
  const port = await closedPort();
  const sandbox = await startSandbox(t, { SANDBOX_PARTNER_TOKEN: TEST_PARTNER_TOKEN });
  const stats = async () => (await sandbox.app.inject({ method: 'GET', url: '/_sandbox/stats' })).json() as SandboxStats;
  // The gateway points at the closed port; the sandbox is reached there later.
  const gw = await buildTestApp(t, { database, env: { PROVIDER_BASE_URL: `http://127.0.0.1:${port}`, PROVIDER_CIRCUIT_OPEN_S: '1' } });
  t.equal((await submitAsync(gw.app, 'refused-1')).statusCode, 202);
  const waiting = await until(async () => {
    const row = await requestOf(gw.database, 'refused-1');
    // Read between two attempts: a claim makes it `submitting` again before its attempt is counted.
    return row && row.forward_attempts >= 2 && row.status !== 'submitting' && row;
  });
  t.equal(waiting.status, 'queued', 'not received, so queued again');
  t.match(waiting.upstream_error, /ECONNREFUSED/);
  t.ok(waiting.queued_body, 'sealed again, to be sent later');
  // The provider comes up on that port: a plain forwarder to the running sandbox.
  const relay = http.createServer((req, res) => {
    const upstream = new URL(req.url ?? '/', sandbox.base);
    const out = http.request(upstream, { method: req.method, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    req.pipe(out);
  });
  await new Promise<void>((resolve) => relay.listen(port, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => relay.close(() => resolve())));
  const sent = await until(async () => {
    const row = await requestOf(gw.database, 'refused-1');
    return row?.status === 'submitted' && row;
  });
  t.equal(sent.upstream_error, null);
  t.equal(sent.queued_body, null);
  t.same(twice(await stats()), []);
  t.equal((await stats()).received['refused-1'], 1);
});

t.test('a 429 or 503 from the provider is retried after its Retry-After, and each customer is received once', async (t) => {
  await resetQueue(database);
  const { gateways, stats, faults } = await pacedSetup(t, { database, env: { PROVIDER_MAX_RPS: '20' } });
  const [gw] = gateways;
  // The sandbox takes 1 a second; the 6 are queued first and then sent as fast as 20/s allows.
  await faults({ maxRps: 1 });
  await holdPace(database, 3600);
  const customers = Array.from({ length: 6 }, (_, i) => `limited-${i}`);
  for (const c of customers) t.equal((await submitAsync(gw!.app, c)).statusCode, 202);
  await holdPace(database, 0);
  await until(async () => {
    const rows = await Promise.all(customers.map((c) => requestOf(gw!.database, c)));
    return rows.every((r) => r?.status === 'submitted' || r?.status === 'completed');
  });
  const seen = await stats();
  t.ok(seen.calls.rateLimited > 0, 'the sandbox refused some with 429');
  t.same(twice(seen), [], 'no customer was received twice');
  t.same(Object.keys(seen.received).sort(), [...customers].sort());
  // Then 503s, with Retry-After 1: refused before anything runs, so sent again.
  await faults({ maxRps: null, fail503Rate: 1 });
  t.equal((await submitAsync(gw!.app, 'unavailable-1')).statusCode, 202);
  await until(async () => (await requestOf(gw!.database, 'unavailable-1'))?.forward_attempts);
  await faults({ fail503Rate: 0 });
  await until(async () => (await requestOf(gw!.database, 'unavailable-1'))?.status === 'completed');
  t.equal((await stats()).received['unavailable-1'], 1);
});

t.test('an ambiguous failure (no answer after sending) ends submit_failed, never sent again, and the late callback completes it', async (t) => {
  await resetQueue(database);
  // The callback 5 s after the sandbox took the request: the 1 s timeout and the write of submit_failed
  // come first even on a slow, loaded host (at 300 ms / 1.5 s they once did not, and at 300 ms the
  // timeout could also fire before the sandbox had read the request).
  const timeoutMs = 1000;
  const { gateways, stats, faults } = await pacedSetup(t, { database, env: { UPSTREAM_TIMEOUT_MS: String(timeoutMs) }, sandboxEnv: { SANDBOX_DELAY_MS: '5000' } });
  const [gw] = gateways;
  await faults({ timeoutAfterReceiveRate: 1 });
  t.equal((await submitAsync(gw!.app, 'ambiguous-1')).statusCode, 202);
  const failed = await until(async () => {
    const row = await requestOf(gw!.database, 'ambiguous-1');
    return row?.status === 'submit_failed' && row;
  });
  t.equal(failed.upstream_error, `provider did not answer within ${timeoutMs} ms`);
  t.equal(failed.queued_body, null);
  t.equal(failed.forward_attempts, 0);
  await until(async () => (await requestOf(gw!.database, 'ambiguous-1'))?.status === 'completed');
  t.equal((await stats()).received['ambiguous-1'], 1, 'sent once');
  t.same(await eventTypes(database, 'ambiguous-1'), ['underwriting.queued', 'underwriting.submit_failed', 'underwriting.completed']);
});

t.test('queued submits are forwarded in the order they were queued', async (t) => {
  await resetQueue(database);
  const { gateways, stats, faults } = await pacedSetup(t, { database, env: { PROVIDER_MAX_IN_FLIGHT: '1' } });
  const [gw] = gateways;
  await faults({ fail503Rate: 1, retryAfterS: 1 });
  const customers = Array.from({ length: 8 }, (_, i) => `order-${i}`);
  for (const c of customers) t.equal((await submitAsync(gw!.app, c)).statusCode, 202);
  await faults({ fail503Rate: 0 });
  await until(async () => Object.keys((await stats()).received).length === customers.length);
  t.same(Object.keys((await stats()).received), customers, 'received oldest first');
});
