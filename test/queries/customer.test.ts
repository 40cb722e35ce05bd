import t from 'tap';
import { buildTestApp, listen } from '../helpers/app.js';
import { freshDatabase } from '../helpers/database.js';
import { httpRequest } from '../helpers/http.js';
import { readCustomers } from '../../src/queries/sql.js';
import { CPF, insertRequest, insertUnmatched, distinctResult } from './fixtures.js';

// One database for the file (every test has its own customers): a fresh PGlite costs seconds.
const database = await freshDatabase(t);

const API_KEY = 'query-key-0123456789abcdef';
const OTHER_KEY = 'second-key-0123456789abcdef';

t.test('a peer outside the query allowlist is refused 403', async (t) => {
  const { app } = await buildTestApp(t, { database, env: { QUERY_ALLOWED_IPS: '127.0.0.1/32' } });
  await insertRequest(database.db, { customerUuid: 'allow-1' });
  const base = await listen(app);
  const outside = await httpRequest(`${base}/v1/underwritings/allow-1`, { localAddress: '127.0.0.2' });
  t.equal(outside.status, 403);
  t.same(outside.json, { error: 'forbidden', message: 'this address may not use this route' });
  const list = await httpRequest(`${base}/v1/underwritings`, { localAddress: '127.0.0.2' });
  t.equal(list.status, 403);
  const lookup = await httpRequest(`${base}/v1/underwritings/lookup`, { localAddress: '127.0.0.2', body: { cpf: CPF } });
  t.equal(lookup.status, 403);
  const inside = await httpRequest(`${base}/v1/underwritings/allow-1`);
  t.equal(inside.status, 200);
});

t.test('with QUERY_API_KEYS set, a missing or wrong bearer key is refused 401 and a right one admitted', async (t) => {
  const { app } = await buildTestApp(t, { database, env: { QUERY_API_KEYS: `${API_KEY},${OTHER_KEY}` } });
  await insertRequest(database.db, { customerUuid: 'keys-1' });
  const base = await listen(app);
  const url = `${base}/v1/underwritings/keys-1`;

  const missing = await httpRequest(url);
  t.equal(missing.status, 401);
  t.same(missing.json, { error: 'unauthorized', message: 'a valid API key is required: Authorization: Bearer <key>' });
  t.equal(missing.headers['www-authenticate'], 'Bearer');
  t.equal((await httpRequest(url, { headers: { authorization: 'Bearer wrong-key-0123456789abcdef' } })).status, 401);
  t.equal((await httpRequest(url, { headers: { authorization: API_KEY } })).status, 401, 'the scheme is required');
  t.equal((await httpRequest(url, { headers: { authorization: `Basic ${API_KEY}` } })).status, 401);
  const list = await httpRequest(`${base}/v1/underwritings`, { headers: { authorization: 'Bearer nope' } });
  t.equal(list.status, 401);
  const lookup = await httpRequest(`${base}/v1/underwritings/lookup`, { body: { cpf: CPF } });
  t.equal(lookup.status, 401);

  t.equal((await httpRequest(url, { headers: { authorization: `Bearer ${API_KEY}` } })).status, 200);
  t.equal((await httpRequest(url, { headers: { authorization: `bearer ${OTHER_KEY}` } })).status, 200, 'any listed key');
  const listed = await httpRequest(`${base}/v1/underwritings`, { headers: { authorization: `Bearer ${API_KEY}` } });
  t.equal(listed.status, 200);
});

t.test('without QUERY_API_KEYS no bearer key is needed', async (t) => {
  const { app } = await buildTestApp(t, { database });
  await insertRequest(database.db, { customerUuid: 'nokey-1' });
  const res = await app.inject({ method: 'GET', url: '/v1/underwritings/nokey-1' });
  t.equal(res.statusCode, 200);
});

t.test('an unknown customer is 404 not_found', async (t) => {
  const { app } = await buildTestApp(t, { database });
  // A stray callback alone does not make a customer known.
  await insertUnmatched(database.db, distinctResult('ghost'));
  const res = await app.inject({ method: 'GET', url: '/v1/underwritings/ghost' });
  t.equal(res.statusCode, 404);
  t.same(res.json(), { error: 'not_found', message: 'no underwriting request for customer ghost' });
});

t.test('a 404 for a customerUuid that holds a CPF does not echo the CPF', async (t) => {
  const { app } = await buildTestApp(t, { database });
  const groups = [CPF.slice(0, 3), CPF.slice(3, 6), CPF.slice(6, 9), CPF.slice(9)];
  for (const customerUuid of [CPF, `cust_${CPF}`, `cust-${groups.join('-')}`, `cust-${groups.join('-_-_')}`, `cust_${groups.join('________')}`]) {
    const res = await app.inject({ method: 'GET', url: `/v1/underwritings/${customerUuid}` });
    t.equal(res.statusCode, 404, customerUuid);
    t.equal(res.json().error, 'not_found', customerUuid);
    t.match(res.json().message, /^no underwriting request for customer \S*\[redacted\]$/, customerUuid);
    t.notMatch(res.body, /529\D*982\D*247\D*25/, `${customerUuid}: not echoed`);
  }
  const plain = await app.inject({ method: 'GET', url: '/v1/underwritings/ghost-2' });
  t.same(plain.json(), { error: 'not_found', message: 'no underwriting request for customer ghost-2' }, 'any other is named');
});

t.test('GET /v1/underwritings/lookup, with no customer of that name, says the lookup is a POST with a JSON body', async (t) => {
  const { app } = await buildTestApp(t, { database });
  const res = await app.inject({ method: 'GET', url: '/v1/underwritings/lookup' });
  t.equal(res.statusCode, 404);
  t.same(res.json(), {
    error: 'not_found',
    message: 'no underwriting request for customer lookup; to find requests by CPF, POST /v1/underwritings/lookup with a JSON body {"cpf": "..."}',
  });
});

t.test('a malformed customerUuid or an unknown query parameter is 400', async (t) => {
  const { app } = await buildTestApp(t, { database });
  const bad = await app.inject({ method: 'GET', url: `/v1/underwritings/${'x'.repeat(129)}` });
  t.equal(bad.statusCode, 400);
  t.equal(bad.json().error, 'validation_failed');
  const longest = await app.inject({ method: 'GET', url: `/v1/underwritings/${'x'.repeat(128)}` });
  t.equal(longest.statusCode, 404, 'a 128-character customerUuid is a valid one');
  const unknown = await app.inject({ method: 'GET', url: '/v1/underwritings/cust-1?wiat=5' });
  t.equal(unknown.statusCode, 400);
  t.same(unknown.json().issues, [{ path: 'wiat', message: 'unknown field' }]);
});

t.test('a pending request answers with its state and a null result', async (t) => {
  const { app } = await buildTestApp(t, { database });
  await insertRequest(database.db, { customerUuid: 'pending-1', submittedAt: '2026-03-01T12:00:00.123Z' });
  const res = await app.inject({ method: 'GET', url: '/v1/underwritings/pending-1' });
  t.equal(res.statusCode, 200);
  t.same(res.json(), {
    customerUuid: 'pending-1',
    status: 'submitted',
    decision: null,
    cpfMasked: '***.982.247-**',
    costSavingEnabled: false,
    srd: { grossIncome: 8000, occupation: 'Retired' },
    submittedAt: '2026-03-01T12:00:00.123Z',
    completedAt: null,
    upstreamStatus: 202,
    result: null,
    history: [],
    unmatched: [],
  });
});

t.test('a re-underwritten customer shows the newest request on top and the older ones in history, newest first', async (t) => {
  const { app } = await buildTestApp(t, { database });
  const db = database.db;
  const first = distinctResult('cust-3', { limit: 0 });
  const second = distinctResult('cust-3', { score: -1, limit: -1 });
  await insertRequest(db, { customerUuid: 'cust-3', submittedAt: '2026-01-01T00:00:00Z', result: first });
  await insertRequest(db, { customerUuid: 'cust-3', submittedAt: '2026-02-01T00:00:00Z', result: second });
  await insertRequest(db, { customerUuid: 'cust-3', submittedAt: '2026-03-01T00:00:00Z', costSavingEnabled: true, srd: null });
  await insertRequest(db, { customerUuid: 'someone-else', result: distinctResult('someone-else') });

  const res = await app.inject({ method: 'GET', url: '/v1/underwritings/cust-3' });
  t.equal(res.statusCode, 200);
  const body = res.json();
  t.match(body, { customerUuid: 'cust-3', status: 'submitted', decision: null, result: null, srd: null, costSavingEnabled: true });
  t.equal(body.submittedAt, '2026-03-01T00:00:00.000Z');
  t.equal(body.history.length, 2);
  t.match(body.history[0], { status: 'completed', decision: 'no_score', submittedAt: '2026-02-01T00:00:00.000Z', result: second });
  t.match(body.history[1], { status: 'completed', decision: 'declined', submittedAt: '2026-01-01T00:00:00.000Z', result: first });
  t.same(body.history[1].result, first, 'the result is the callback body as stored');
  t.type(body.history[1].completedAt, 'string');
  t.same(Object.keys(body.history[0]).sort(), [
    'completedAt', 'costSavingEnabled', 'cpfMasked', 'customerUuid', 'decision', 'result', 'srd', 'status', 'submittedAt', 'upstreamStatus',
  ], 'a request carries exactly the contract fields');
  t.same(body.unmatched, []);
});

t.test('callbacks for the customer that matched nothing are listed in unmatched', async (t) => {
  const { app } = await buildTestApp(t, { database });
  const answered = distinctResult('cust-4');
  await insertRequest(database.db, { customerUuid: 'cust-4', result: answered });
  const stray1 = distinctResult('cust-4', { limit: 100 });
  const stray2 = distinctResult('cust-4', { limit: 200 });
  await insertUnmatched(database.db, stray1);
  await insertUnmatched(database.db, stray2);
  await insertUnmatched(database.db, distinctResult('cust-other'));

  const res = await app.inject({ method: 'GET', url: '/v1/underwritings/cust-4' });
  t.equal(res.statusCode, 200);
  const body = res.json();
  t.same(body.result, answered);
  t.equal(body.decision, 'approved');
  t.equal(body.unmatched.length, 2);
  t.same(body.unmatched.map((u: { result: unknown }) => u.result), [stray2, stray1], 'newest first');
  t.same(Object.keys(body.unmatched[0]).sort(), ['receivedAt', 'result']);
  t.ok(!Number.isNaN(Date.parse(body.unmatched[0].receivedAt)));
});

t.test('result is the callback body as stored, limited to the fields the provider documents', async (t) => {
  const { app } = await buildTestApp(t, { database });
  const stored = distinctResult('cust-5');
  const body = { ...stored, extra: 'provider-added', cpf: CPF, response: { ...stored.response, newField: 7 } };
  await insertRequest(database.db, { customerUuid: 'cust-5', result: body });
  const res = await app.inject({ method: 'GET', url: '/v1/underwritings/cust-5' });
  t.equal(res.statusCode, 200);
  t.same(res.json().result, stored);
});

t.test('answers never contain the full CPF', async (t) => {
  const { app, logs } = await buildTestApp(t, { database });
  await insertRequest(database.db, { customerUuid: 'cust-6', result: distinctResult('cust-6') });
  await insertRequest(database.db, { customerUuid: 'cust-6' });
  const answers = [
    await app.inject({ method: 'GET', url: '/v1/underwritings/cust-6' }),
    await app.inject({ method: 'GET', url: '/v1/underwritings' }),
    await app.inject({ method: 'POST', url: '/v1/underwritings/lookup', payload: { cpf: CPF } }),
  ];
  for (const res of answers) {
    t.equal(res.statusCode, 200);
    t.notMatch(res.body, CPF);
    t.match(res.body, '***.982.247-**');
  }
  t.notMatch(logs.text(), CPF, 'nor do the logs');
});

t.test('GETs that arrive together are read in one statement, and each is answered with its own customer', async (t) => {
  const { app } = await buildTestApp(t, { database });
  const customers = Array.from({ length: 6 }, (_, i) => `together-${i}`);
  for (const [i, customerUuid] of customers.entries()) {
    await insertRequest(database.db, { customerUuid, srd: { grossIncome: 1000 + i }, result: i % 2 === 0 ? distinctResult(customerUuid, { limit: 100 * i }) : undefined });
    if (i === 1) await insertRequest(database.db, { customerUuid, srd: { grossIncome: 9000 }, status: 'submit_failed' });
  }
  await insertUnmatched(database.db, distinctResult('together-3'));
  const base = await listen(app);

  const asked = Array.from({ length: 40 }, (_, n) => (n % 7 === 6 ? 'together-missing' : customers[n % 6]!));
  const answers = await Promise.all(asked.map((c) => httpRequest(`${base}/v1/underwritings/${c}`)));
  for (const [n, customerUuid] of asked.entries()) {
    const { status, json } = answers[n]!;
    if (customerUuid === 'together-missing') {
      t.equal(status, 404, `${n}: no such customer`);
      continue;
    }
    const i = customers.indexOf(customerUuid);
    t.equal(status, 200);
    t.match(json, { customerUuid, srd: { grossIncome: i === 1 ? 9000 : 1000 + i } }, `${n}: its own customer's newest request`);
    t.equal(json.history.length, i === 1 ? 1 : 0, `${n}: its own history`);
    t.equal(json.unmatched.length, i === 3 ? 1 : 0, `${n}: its own unmatched callbacks`);
    if (i % 2 === 0) t.match(json.result, { response: { limit: 100 * i } }, `${n}: its own result`);
  }

  const views = await readCustomers(database.db, ['together-2', 'together-missing', 'together-0', 'together-2']);
  t.same(views.map((v) => v?.customerUuid), ['together-2', undefined, 'together-0', 'together-2'], 'one statement answers in the order asked, a customer asked twice twice');
});
