import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { until } from '../helpers/until.js';
import { freshDatabase } from '../helpers/database.js';
import { buildTestApp } from '../helpers/app.js';
import { ADMIN_KEY, dumpDatabase, dumpForms } from '../personal-data/fixtures.js';
import { CPF, validRequest } from './fixtures.js';
import { pacedSetup, requestOf, submitAsync, twice } from './pacing-fixtures.js';

// Prefer: respond-async, end to end: the gateway (on a real database) and the sandbox over HTTP.

const eventTypes = async (db: Awaited<ReturnType<typeof freshDatabase>>['db'], customerUuid: string) =>
  (await db.selectFrom('events').select('type').where('customer_uuid', '=', customerUuid).orderBy('id').execute()).map((e) => e.type);

/** A port nothing listens on (connections are refused). */
async function closedPort(): Promise<number> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

t.test('a submit with Prefer: respond-async is answered 202 queued at once, then forwarded and completed', async (t) => {
  const { gateways, stats } = await pacedSetup(t);
  const [gw] = gateways;
  const res = await submitAsync(gw!.app, 'queued-1');
  t.equal(res.statusCode, 202);
  t.same(res.json(), { customerUuid: 'queued-1', status: 'queued', submittedAt: null });
  t.equal(res.headers['preference-applied'], 'respond-async');
  const done = await until(async () => {
    const row = await requestOf(gw!.database, 'queued-1');
    return row?.status === 'completed' && row;
  });
  t.equal(done.upstream_status, 202);
  t.equal(done.queued_body, null, 'the sealed body left the table when it was claimed');
  t.same(await eventTypes(gw!.database.db, 'queued-1'), ['underwriting.queued', 'underwriting.submitted', 'underwriting.completed']);
  const view = await gw!.app.inject({ method: 'GET', url: '/v1/underwritings/queued-1' });
  t.match(view.json(), { status: 'completed', submittedAt: String });
  t.same((await stats()).received, { 'queued-1': 1 }, 'the provider received it once');
});

t.test('a queued submit obeys the synchronous rules: validation, one in flight per customer, Idempotency-Key', async (t) => {
  const gw = await buildTestApp(t, { env: { PROVIDER_BASE_URL: `http://127.0.0.1:${await closedPort()}` } });
  const invalid = await gw.app.inject({
    method: 'POST',
    url: '/v1/underwritings',
    headers: { 'content-type': 'application/json', prefer: 'respond-async' },
    payload: JSON.stringify({ ...validRequest({ customerUuid: 'rules-1' }), cpf: '123' }),
  });
  t.equal(invalid.statusCode, 400);
  t.equal(await requestOf(gw.database, 'rules-1'), undefined, 'nothing stored');
  const first = await submitAsync(gw.app, 'rules-1', { 'idempotency-key': 'k-rules-1' });
  t.equal(first.statusCode, 202);
  const again = await submitAsync(gw.app, 'rules-1', { 'idempotency-key': 'k-rules-1' });
  t.equal(again.statusCode, 202);
  t.same(again.json(), first.json(), 'the same key and body: the first answer again');
  t.equal(again.headers['idempotent-replayed'], 'true');
  const second = await submitAsync(gw.app, 'rules-1');
  t.equal(second.statusCode, 409, 'a queued request holds its customer');
  t.equal(second.json().error, 'in_flight');
  const sync = await gw.app.inject({ method: 'POST', url: '/v1/underwritings', headers: { 'content-type': 'application/json' }, payload: JSON.stringify(validRequest({ customerUuid: 'rules-1' })) });
  t.equal(sync.statusCode, 409, 'for a synchronous submit too');
  const view = await gw.app.inject({ method: 'GET', url: '/v1/underwritings/rules-1' });
  t.match(view.json(), { status: 'queued', submittedAt: null });
});

t.test('a provider that refuses connections: the request stays queued, and is forwarded once when the provider is up', async (t) => {
  const port = await closedPort();
  const { sandbox, stats } = await pacedSetup(t);
  // A second gateway on its own database, pointed at the closed port; the sandbox is reached there later.
  const gw = await buildTestApp(t, { env: { PROVIDER_BASE_URL: `http://127.0.0.1:${port}`, PROVIDER_CIRCUIT_OPEN_S: '1' } });
  t.equal((await submitAsync(gw.app, 'refused-1')).statusCode, 202);
  const waiting = await until(async () => {
    const row = await requestOf(gw.database, 'refused-1');
    return row && row.forward_attempts >= 2 && row;
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
  const { gateways, stats, faults } = await pacedSetup(t, { env: { PROVIDER_MAX_RPS: '20' } });
  const [gw] = gateways;
  // The sandbox takes 2 a second: most of the 6 are refused 429 at first.
  await faults({ maxRps: 2 });
  const customers = Array.from({ length: 6 }, (_, i) => `limited-${i}`);
  for (const c of customers) t.equal((await submitAsync(gw!.app, c)).statusCode, 202);
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
  const { gateways, stats, faults } = await pacedSetup(t, { env: { UPSTREAM_TIMEOUT_MS: '300' }, sandboxEnv: { SANDBOX_DELAY_MS: '1500' } });
  const [gw] = gateways;
  await faults({ timeoutAfterReceiveRate: 1 });
  t.equal((await submitAsync(gw!.app, 'ambiguous-1')).statusCode, 202);
  const failed = await until(async () => {
    const row = await requestOf(gw!.database, 'ambiguous-1');
    return row?.status === 'submit_failed' && row;
  });
  t.equal(failed.upstream_error, 'provider did not answer within 300 ms');
  t.equal(failed.queued_body, null);
  t.equal(failed.forward_attempts, 0);
  await until(async () => (await requestOf(gw!.database, 'ambiguous-1'))?.status === 'completed');
  t.equal((await stats()).received['ambiguous-1'], 1, 'sent once');
  t.same(await eventTypes(gw!.database.db, 'ambiguous-1'), ['underwriting.queued', 'underwriting.submit_failed', 'underwriting.completed']);
});

t.test('queued submits are forwarded in the order they were queued', async (t) => {
  const { gateways, stats, faults } = await pacedSetup(t, { env: { PROVIDER_MAX_IN_FLIGHT: '1' } });
  const [gw] = gateways;
  await faults({ fail503Rate: 1, retryAfterS: 1 });
  const customers = Array.from({ length: 8 }, (_, i) => `order-${i}`);
  for (const c of customers) t.equal((await submitAsync(gw!.app, c)).statusCode, 202);
  await faults({ fail503Rate: 0 });
  await until(async () => Object.keys((await stats()).received).length === customers.length);
  t.same(Object.keys((await stats()).received), customers, 'received oldest first');
});

t.test('no CPF is stored in clear while a submit is queued, and erasure removes a queued request', async (t) => {
  const database = await freshDatabase(t);
  const gw = await buildTestApp(t, {
    database,
    env: { PROVIDER_BASE_URL: `http://127.0.0.1:${await closedPort()}`, ADMIN_API_KEYS: ADMIN_KEY },
  });
  t.equal((await submitAsync(gw.app, 'dump-1')).statusCode, 202);
  const row = await requestOf(database, 'dump-1');
  t.ok(row?.queued_body, 'the body to forward is stored (sealed)');
  const dump = await dumpDatabase(database);
  for (const form of dumpForms(CPF)) t.notMatch(dump, form, 'no CPF in the dump');
  t.notMatch(gw.logs.text(), CPF, 'nor in the logs');
  const erased = await gw.app.inject({
    method: 'POST',
    url: '/v1/personal-data/erase',
    headers: { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': 'application/json' },
    payload: JSON.stringify({ cpf: CPF }),
  });
  t.equal(erased.statusCode, 200, 'a queued request is not in flight: it is erased');
  t.equal(await requestOf(database, 'dump-1'), undefined);
});
