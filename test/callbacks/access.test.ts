import t, { type Test } from 'tap';
import { buildTestApp, listen } from '../helpers/app.js';
import { freshDatabase } from '../helpers/database.js';
import { httpRequest } from '../helpers/http.js';
import {
  CALLBACK_URL,
  callbacksAfter,
  callbacksOf,
  customer,
  lastCallbackId,
  insertRequest,
  postCallback,
  requestById,
  resultBody,
} from './fixtures.js';

const SECRET = 'callback-secret-0123456789';
const WRONG = 'not-the-secret-9876543210';

// One database for the file (each test has its own customers): a fresh PGlite costs seconds.
const shared = await freshDatabase(t);
const gateway = (test: Test, env: Record<string, string> = {}) => buildTestApp(test, { env, database: shared });

const refusedCount = async (app: Awaited<ReturnType<typeof gateway>>['app']) => {
  const metrics = (await app.inject({ method: 'GET', url: '/metrics' })).body;
  return Number(/underwriting_callbacks_total\{outcome="refused"\} (\d+)/.exec(metrics)?.[1]);
};

t.test('with CALLBACK_SECRET set, a missing or wrong token is refused 401 and nothing is stored', async (t) => {
  const { app, database, logs } = await gateway(t, { CALLBACK_SECRET: SECRET });
  const cust = customer('token');
  const requestId = await insertRequest(database.db, { customerUuid: cust, status: 'submitted' });
  const body = resultBody(cust);

  for (const query of ['', `?token=${WRONG}`, '?token=', `?token=${SECRET}x`, `?token=${SECRET}&token=${SECRET}`]) {
    const res = await postCallback(app, body, { query });
    t.equal(res.statusCode, 401, `refused: "${query.replaceAll(SECRET, 'SECRET')}"`);
    t.same(res.json(), { error: 'unauthorized', message: 'missing or wrong callback token' });
  }
  t.same(await callbacksOf(database.db, cust), [], 'not stored');
  t.match(await requestById(database.db, requestId), { status: 'submitted' });
  t.equal(await refusedCount(app), 5, 'counted as refused');

  const warnings = logs.entries().filter((e) => e.msg === 'refused: wrong or missing callback token');
  t.equal(warnings.length, 5);
  t.match(warnings[0], { level: 'warn', group: 'callback', client: '127.0.0.1', presented: false });
  t.match(warnings[1], { presented: true });
  const text = logs.text();
  t.notMatch(text, SECRET, 'the secret never reaches the logs');
  t.notMatch(text, WRONG, 'nor a wrong token');
  t.match(text, /"url":"\/v1\/callbacks\/underwriting\?token"/, 'the logged URL names the token parameter, never its value');
});

t.test('with CALLBACK_SECRET set, the right token is accepted and never logged', async (t) => {
  const { app, database, logs } = await gateway(t, { CALLBACK_SECRET: SECRET });
  const cust = customer('token-ok');
  const requestId = await insertRequest(database.db, { customerUuid: cust, status: 'submitted' });
  const res = await postCallback(app, resultBody(cust), { query: `?token=${encodeURIComponent(SECRET)}` });
  t.equal(res.statusCode, 200);
  t.same(res.json(), { received: true });
  t.match(await requestById(database.db, requestId), { status: 'completed' });
  t.notMatch(logs.text(), SECRET);
});

t.test('the token is checked before the body is read', async (t) => {
  const { app, database } = await gateway(t, { CALLBACK_SECRET: SECRET });
  const before = await lastCallbackId(database.db);
  const res = await postCallback(app, { ...resultBody(customer('early')), padding: 'x'.repeat(100 * 1024) });
  t.equal(res.statusCode, 401, 'an oversized body is not even looked at: 401, not 413');
  const invalid = await postCallback(app, '{not json', { query: `?token=${WRONG}` });
  t.equal(invalid.statusCode, 401, 'an invalid body from an unauthenticated caller is not kept');
  t.same(await callbacksAfter(database.db, before), []);
});

t.test('without CALLBACK_SECRET no token is needed, and one given is ignored', async (t) => {
  const { app, database } = await gateway(t);
  const first = customer('open');
  const second = customer('open');
  await insertRequest(database.db, { customerUuid: first, status: 'submitted' });
  await insertRequest(database.db, { customerUuid: second, status: 'submitted' });
  t.equal((await postCallback(app, resultBody(first))).statusCode, 200);
  t.equal((await postCallback(app, resultBody(second), { query: '?token=whatever' })).statusCode, 200);
});

t.test('a real peer outside the callback allowlist is refused 403, before its body is read, and nothing is stored', async (t) => {
  const { app, database, logs } = await gateway(t, { CALLBACK_ALLOWED_IPS: '127.0.0.1/32' });
  const base = await listen(app);
  const cust = customer('peer');
  const requestId = await insertRequest(database.db, { customerUuid: cust, status: 'submitted' });

  const outside = await httpRequest(`${base}${CALLBACK_URL}`, { body: resultBody(cust), localAddress: '127.0.0.2' });
  t.equal(outside.status, 403);
  t.same(outside.json, { error: 'forbidden', message: 'this address may not use this route' });
  const big = await httpRequest(`${base}${CALLBACK_URL}`, {
    body: { ...resultBody(cust), padding: 'x'.repeat(100 * 1024) },
    localAddress: '127.0.0.2',
  });
  t.equal(big.status, 403, '403, not 413');
  t.same(await callbacksOf(database.db, cust), [], 'not stored');
  t.match(await requestById(database.db, requestId), { status: 'submitted' });
  t.equal(await refusedCount(app), 2, 'counted as refused');
  t.match(
    logs.entries().find((e) => e.msg === 'refused: address not in allowlist'),
    { level: 'warn', group: 'callback', client: '127.0.0.2' },
  );

  const inside = await httpRequest(`${base}${CALLBACK_URL}`, { body: resultBody(cust) });
  t.equal(inside.status, 200);
  t.match(await callbacksOf(database.db, cust), [{ outcome: 'matched', peer: '127.0.0.1' }]);
});

t.test('behind a trusted proxy the stored peer is the forwarded client', async (t) => {
  const { app, database } = await gateway(t, { CALLBACK_ALLOWED_IPS: '203.0.113.7/32', TRUST_PROXY: '127.0.0.3/32' });
  const base = await listen(app);
  const cust = customer('proxied');
  await insertRequest(database.db, { customerUuid: cust, status: 'submitted' });
  const res = await httpRequest(`${base}${CALLBACK_URL}`, {
    body: resultBody(cust),
    localAddress: '127.0.0.3',
    headers: { 'x-forwarded-for': '203.0.113.7' },
  });
  t.equal(res.status, 200);
  t.match(await callbacksOf(database.db, cust), [{ outcome: 'matched', peer: '203.0.113.7' }]);
});
