import t from 'tap';
import { until } from '../helpers/until.js';
import { freshDatabase } from '../helpers/database.js';
import { buildTestApp } from '../helpers/app.js';
import { ADMIN_KEY, dumpDatabase, dumpForms } from '../personal-data/fixtures.js';
import { CPF, validRequest } from './fixtures.js';
import { pacedSetup, closedPort, eventTypes, holdPace, requestOf, resetQueue, submitAsync } from './pacing-fixtures.js';

// Prefer: respond-async, end to end: the gateway (on a real database) and the sandbox over HTTP.




// One database for the file (each test has its own customers; resetQueue clears what the previous left): a fresh PGlite costs seconds.
const database = await freshDatabase(t);

t.test('a submit with Prefer: respond-async is answered 202 queued at once, then forwarded and completed', async (t) => {
  await resetQueue(database);
  // The result 2 s after the 202, as a provider's takes seconds: the forward's outcome is written
  // first (a callback that wins the race is test/submissions/mark-forwarded.test.ts); 200 ms was
  // not always enough for that write on a slow, loaded host.
  const { gateways, stats } = await pacedSetup(t, { database, sandboxEnv: { SANDBOX_DELAY_MS: '2000' } });
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
  t.same(await eventTypes(database, 'queued-1'), ['underwriting.queued', 'underwriting.submitted', 'underwriting.completed']);
  const view = await gw!.app.inject({ method: 'GET', url: '/v1/underwritings/queued-1' });
  t.match(view.json(), { status: 'completed', submittedAt: String });
  t.same((await stats()).received, { 'queued-1': 1 }, 'the provider received it once');
});

t.test('a queued submit obeys the synchronous rules: validation, one in flight per customer, Idempotency-Key', async (t) => {
  await resetQueue(database);
  const gw = await buildTestApp(t, { database, env: { PROVIDER_BASE_URL: `http://127.0.0.1:${await closedPort()}` } });
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
  // Its forwarder keeps trying the closed port: queued, or claimed for a moment.
  const view = await until(async () => {
    const res = await gw.app.inject({ method: 'GET', url: '/v1/underwritings/rules-1' });
    const body = res.json() as { status: string; submittedAt: string | null };
    return body.status === 'queued' && body;
  });
  t.equal(view.submittedAt, null, 'never sent: no submittedAt');
});

t.test('no CPF is stored in clear while a submit is queued, and erasure removes a queued request', async (t) => {
  await resetQueue(database);
  const gw = await buildTestApp(t, {
    database,
    env: { PROVIDER_BASE_URL: `http://127.0.0.1:${await closedPort()}`, ADMIN_API_KEYS: ADMIN_KEY },
  });
  // Nothing is forwarded meanwhile: the request stays queued, its body with it.
  await holdPace(database, 3600);
  t.equal((await submitAsync(gw.app, 'dump-1')).statusCode, 202);
  const row = await requestOf(database, 'dump-1');
  t.equal(row?.status, 'queued');
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
