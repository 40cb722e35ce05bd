import t, { type Test } from 'tap';
import type { DatabaseHandle } from '../../src/db/handle.js';
import { unpackKeys } from '../../src/channels/announcer.js';
import { RESULTS_CHANNEL } from '../../src/channels/names.js';
import type { RequestStatus } from '../../src/db/types.js';
import { buildTestApp } from '../helpers/app.js';
import { anotherConnection, ENGINE, freshDatabase } from '../helpers/database.js';
import { callbacksOf, customer, insertRequest, postCallback, requestById, resultBody } from './fixtures.js';

// One database for the file (each test has its own customers): a fresh PGlite costs seconds.
const shared = await freshDatabase(t);
const gateway = (test: Test, options: { clock?: () => Date } = {}) => buildTestApp(test, { ...options, database: shared });

t.test('a callback for a submitted request is stored, matched and completes it', async (t) => {
  const clock = () => new Date('2026-11-22T03:00:42.000Z');
  const { app, database } = await gateway(t, { clock });
  const db = database.db;
  const cust = customer('cust');
  const submittedAt = new Date('2026-11-22T03:00:00.000Z');
  const requestId = await insertRequest(db, { customerUuid: cust, status: 'submitted', submittedAt });
  const body = resultBody(cust);

  const res = await postCallback(app, body);
  t.equal(res.statusCode, 200);
  t.same(res.json(), { received: true });

  const [callback, ...others] = await callbacksOf(db, cust);
  t.equal(others.length, 0);
  t.match(callback, {
    outcome: 'matched',
    error: null,
    customer_uuid: cust,
    decision: 'approved',
    request_id: requestId,
    peer: '127.0.0.1',
  });
  t.same(callback!.body, body, 'the body is stored as received');
  t.equal(Buffer.from(callback!.raw_body).toString('utf8'), JSON.stringify(body), 'and so are its bytes');
  t.same(callback!.started, new Date(body.started));
  t.same(callback!.finished, new Date(body.finished));
  t.same(callback!.received_at, clock());

  const request = await requestById(db, requestId);
  t.match(request, { status: 'completed', decision: 'approved', result_callback_id: callback!.id });
  t.same(request.completed_at, clock());
  t.same(request.updated_at, clock());

  const metrics = (await app.inject({ method: 'GET', url: '/metrics' })).body;
  t.match(metrics, /underwriting_callbacks_total\{outcome="matched"\} 1/);
  t.match(metrics, /underwriting_callback_turnaround_seconds_bucket\{le="60"\} 1/);
  t.match(metrics, /underwriting_callback_turnaround_seconds_bucket\{le="30"\} 0/);
  t.match(metrics, /underwriting_callback_turnaround_seconds_sum 42/);
});

const decisions = [
  { name: 'approved when limit > 0', response: { score: 650, riskBand: 2, limit: 3000 }, decision: 'approved' },
  { name: 'declined when limit is 0', response: { score: 310, riskBand: 7, limit: 0 }, decision: 'declined' },
  { name: 'no_score when score is -1 without cost saving', response: { score: -1, riskBand: -1, limit: -1 }, decision: 'no_score' },
  { name: 'no_score when limit is -1', response: { score: 500, riskBand: 4, limit: -1 }, decision: 'no_score' },
  {
    name: 'filtered when score is -1 with cost saving',
    response: { score: -1, riskBand: -1, limit: -1, costSavingEnabled: true },
    decision: 'filtered',
  },
] as const;

for (const d of decisions) {
  t.test(`the decision is ${d.name}, on the request and on the callback`, async (t) => {
    const { app, database } = await gateway(t);
    const cust = customer('decided');
    const requestId = await insertRequest(database.db, { customerUuid: cust, status: 'submitted', costSavingEnabled: 'costSavingEnabled' in d.response });
    const res = await postCallback(app, resultBody(cust, d.response));
    t.equal(res.statusCode, 200);
    const [callback] = await callbacksOf(database.db, cust);
    t.equal(callback!.decision, d.decision);
    t.match(await requestById(database.db, requestId), { status: 'completed', decision: d.decision });
  });
}

const states: Array<{ status: RequestStatus; why: string }> = [
  { status: 'submitting', why: 'a callback that overtakes the provider reply to our submit' },
  { status: 'expired', why: 'a late callback' },
  { status: 'submit_failed', why: 'a callback for a submit that failed on our side' },
];

for (const { status, why } of states) {
  t.test(`${why} completes the request (${status} -> completed)`, async (t) => {
    const { app, database } = await gateway(t);
    const cust = customer(status);
    const requestId = await insertRequest(database.db, { customerUuid: cust, status });
    const res = await postCallback(app, resultBody(cust));
    t.equal(res.statusCode, 200);
    t.same(res.json(), { received: true });
    const [callback] = await callbacksOf(database.db, cust);
    t.match(callback, { outcome: 'matched', request_id: requestId });
    t.match(await requestById(database.db, requestId), {
      status: 'completed',
      result_callback_id: callback!.id,
      decision: 'approved',
    });
  });
}

t.test('a callback completes the newest request of the customer that has no result yet', async (t) => {
  const { app, database } = await gateway(t);
  const db = database.db;
  const cust = customer('newest');
  const older = await insertRequest(db, { customerUuid: cust, status: 'submit_failed' });
  const newer = await insertRequest(db, { customerUuid: cust, status: 'submitted' });
  const elsewhere = await insertRequest(db, { customerUuid: customer('other'), status: 'submitted' });

  t.equal((await postCallback(app, resultBody(cust))).statusCode, 200);
  const [callback] = await callbacksOf(db, cust);
  t.match(callback, { outcome: 'matched', request_id: newer });
  t.match(await requestById(db, newer), { status: 'completed', result_callback_id: callback!.id });
  t.match(await requestById(db, older), { status: 'submit_failed', result_callback_id: null, decision: null });
  t.match(await requestById(db, elsewhere), { status: 'submitted', result_callback_id: null });
});

t.test('a duplicate callback answers 200 and stores nothing new', async (t) => {
  const { app, database } = await gateway(t);
  const db = database.db;
  const cust = customer('dup');
  const requestId = await insertRequest(db, { customerUuid: cust, status: 'submitted' });
  const body = resultBody(cust);
  t.equal((await postCallback(app, body)).statusCode, 200);
  const before = await requestById(db, requestId);

  // The same result again, even with its instant written in another zone.
  const inBrasilia = new Date(Date.parse(body.started) - 3 * 3600_000).toISOString().replace(/Z$/, '-03:00');
  const again = await postCallback(app, { ...body, started: inBrasilia });
  t.equal(again.statusCode, 200);
  t.same(again.json(), { received: true });
  // Without a zone (UTC, as the spec says) and with a +HHMM offset, it is still the same instant.
  const started = body.started.replace(/Z$/, '');
  t.equal((await postCallback(app, { ...body, started })).statusCode, 200);
  t.equal((await postCallback(app, { ...body, started: `${started}+0000` })).statusCode, 200);
  t.equal((await callbacksOf(db, cust)).length, 1, 'one row');
  t.same(await requestById(db, requestId), before, 'the request is untouched');
  const metrics = (await app.inject({ method: 'GET', url: '/metrics' })).body;
  t.match(metrics, /underwriting_callbacks_total\{outcome="duplicate"\} 3/);
});

t.test('ten concurrent copies of one callback store exactly one row and complete the request once', async (t) => {
  const { app, database } = await gateway(t);
  const db = database.db;
  const cust = customer('race');
  const requestId = await insertRequest(db, { customerUuid: cust, status: 'submitted' });
  const body = resultBody(cust);
  const answers = await Promise.all(Array.from({ length: 10 }, () => postCallback(app, body)));
  t.same(
    answers.map((a) => a.statusCode),
    Array(10).fill(200),
  );
  const rows = await callbacksOf(db, cust);
  t.equal(rows.length, 1);
  t.match(rows[0], { outcome: 'matched', request_id: requestId });
  t.match(await requestById(db, requestId), { status: 'completed', result_callback_id: rows[0]!.id });
  const metrics = (await app.inject({ method: 'GET', url: '/metrics' })).body;
  t.match(metrics, /underwriting_callbacks_total\{outcome="matched"\} 1\n/);
  t.match(metrics, /underwriting_callbacks_total\{outcome="duplicate"\} 9\n/);
});

t.test('copies arriving at two instances at once store one row', async (t) => {
  const first = await gateway(t);
  const second = await buildTestApp(t, { database: await anotherConnection(t, shared) });
  const cust = customer('two');
  const requestId = await insertRequest(shared.db, { customerUuid: cust, status: 'submitted' });
  const body = resultBody(cust);
  const answers = await Promise.all(
    Array.from({ length: 10 }, (_, i) => postCallback(i % 2 ? first.app : second.app, body)),
  );
  t.same(
    answers.map((a) => a.statusCode),
    Array(10).fill(200),
  );
  const rows = await callbacksOf(shared.db, cust);
  t.equal(rows.length, 1);
  t.match(await requestById(shared.db, requestId), { status: 'completed', result_callback_id: rows[0]!.id });
});

t.test('a callback no request waits for is stored as unmatched and answered 200', async (t) => {
  const { app, database } = await gateway(t);
  const cust = customer('nobody');
  const body = resultBody(cust);
  const res = await postCallback(app, body);
  t.equal(res.statusCode, 200);
  t.same(res.json(), { received: true });
  const rows = await callbacksOf(database.db, cust);
  t.equal(rows.length, 1);
  t.match(rows[0], { outcome: 'unmatched', request_id: null, customer_uuid: cust, decision: 'approved' });
  t.same(rows[0]!.body, body);
  const metrics = (await app.inject({ method: 'GET', url: '/metrics' })).body;
  t.match(metrics, /underwriting_callbacks_total\{outcome="unmatched"\} 1/);
});

t.test('a second, different callback for an answered request is unmatched and changes nothing', async (t) => {
  const { app, database } = await gateway(t);
  const db = database.db;
  const cust = customer('twice');
  const requestId = await insertRequest(db, { customerUuid: cust, status: 'submitted' });
  t.equal((await postCallback(app, resultBody(cust, { limit: 5000 }))).statusCode, 200);
  const answered = await requestById(db, requestId);

  const other = resultBody(cust, { finished: '2026-11-22T03:05:00.000Z', score: 200, limit: 0 });
  const res = await postCallback(app, other);
  t.equal(res.statusCode, 200);
  t.same(res.json(), { received: true });
  const rows = await callbacksOf(db, cust);
  t.equal(rows.length, 2);
  t.match(rows[1], { outcome: 'unmatched', request_id: null, decision: 'declined' });
  t.same(rows[1]!.body, other, 'kept, visible');
  t.same(await requestById(db, requestId), answered, 'the first result stands');
  t.equal(answered.decision, 'approved');
});

t.test('two different results racing for one waiting request: one completes it, the other is unmatched', async (t) => {
  const { app, database } = await gateway(t);
  const cust = customer('rivals');
  const requestId = await insertRequest(database.db, { customerUuid: cust, status: 'submitted' });
  const rivals = Array.from({ length: 6 }, (_, i) =>
    resultBody(cust, { finished: `2026-11-22T03:00:1${i}.000Z`, limit: 1000 * (i + 1) }),
  );
  const answers = await Promise.all(rivals.map((body) => postCallback(app, body)));
  t.same(
    answers.map((a) => a.statusCode),
    Array(6).fill(200),
  );
  const rows = await callbacksOf(database.db, cust);
  t.equal(rows.length, 6, 'all kept');
  const matched = rows.filter((r) => r.outcome === 'matched');
  t.equal(matched.length, 1, 'exactly one matched');
  t.equal(rows.filter((r) => r.outcome === 'unmatched').length, 5);
  t.match(await requestById(database.db, requestId), {
    status: 'completed',
    result_callback_id: matched[0]!.id,
    decision: 'approved',
  });
});

t.test('a stored result is announced on the results channel once committed; a duplicate is not', async (t) => {
  const { app, database } = await gateway(t);
  const cust = customer('notify');
  const stranger = customer('stranger');
  await insertRequest(database.db, { customerUuid: cust, status: 'submitted' });
  const notifications = await listenForResults(t, database);

  t.equal((await postCallback(app, resultBody(cust))).statusCode, 200);
  t.same(await notifications.next(), cust);
  t.match(await callbacksOf(database.db, cust), [{ outcome: 'matched' }], 'visible to whoever is woken');
  t.equal((await postCallback(app, resultBody(cust))).statusCode, 200, 'a duplicate');
  t.equal((await postCallback(app, resultBody(stranger))).statusCode, 200, 'an unmatched one');
  t.same(await notifications.next(), stranger, 'the next announcement is the unmatched one, not the duplicate');
});

t.test('every result of a concurrent burst is announced, once per customer', async (t) => {
  const { app, database } = await gateway(t);
  const notifications = await listenForResults(t, database);
  const customers = Array.from({ length: 25 }, () => customer('burst'));
  for (const c of customers.slice(0, 15)) await insertRequest(database.db, { customerUuid: c, status: 'submitted' });
  const answers = await Promise.all(customers.map((c) => postCallback(app, resultBody(c))));
  t.ok(answers.every((a) => a.statusCode === 200));
  const heard: string[] = [];
  while (heard.length < customers.length) heard.push(await notifications.next());
  t.same(heard.sort(), [...customers].sort(), 'matched and unmatched alike');
  const metrics = (await app.inject({ method: 'GET', url: '/metrics' })).body;
  t.match(metrics, /underwriting_callback_batch_size_sum 25\n/, 'every result went through a batch');
});

/** LISTENs on the results channel the way a long-poll on another instance would. */
async function listenForResults(t: Test, database: DatabaseHandle) {
  const payloads: string[] = [];
  const waiting: Array<(p: string) => void> = [];
  // A notification carries the keys of one commit, one per line (announcer.ts): each is an announcement.
  const deliver = (payload: string) => {
    for (const key of unpackKeys(payload)) {
      const w = waiting.shift();
      if (w) w(key);
      else payloads.push(key);
    }
  };
  if (ENGINE === 'postgres') {
    const pg = (await import('pg')).default;
    const client = new pg.Client({ connectionString: database.connectionString });
    await client.connect();
    t.teardown(() => client.end());
    client.on('notification', (n) => deliver(n.payload ?? ''));
    await client.query(`listen ${RESULTS_CHANNEL}`);
  } else {
    const unlisten = await database.pglite!.listen(RESULTS_CHANNEL, deliver);
    t.teardown(() => unlisten());
  }
  return {
    next: () => new Promise<string>((resolve) => (payloads.length > 0 ? resolve(payloads.shift()!) : waiting.push(resolve))),
  };
}

t.test('a late result of an expired request completes that request, never a newer one submitted after its pipeline started', async (t) => {
  const { app, database } = await gateway(t);
  const db = database.db;
  const cust = customer('late');
  const t0 = Date.parse('2026-11-22T03:00:00.000Z');
  const older = await insertRequest(db, { customerUuid: cust, status: 'expired', submittedAt: new Date(t0) });
  const newer = await insertRequest(db, { customerUuid: cust, status: 'submitted', submittedAt: new Date(t0 + 3600_000) });
  const started = new Date(t0 + 10_000).toISOString();

  const res = await postCallback(app, resultBody(cust, { started, finished: new Date(t0 + 20_000).toISOString() }));
  t.equal(res.statusCode, 200);
  t.match(await requestById(db, older), { status: 'completed' }, 'the request the result belongs to');
  t.match(await requestById(db, newer), { status: 'submitted', result_callback_id: null }, 'the newer request still waits for its own');
});

t.test('a request submitted up to CORRELATION_SKEW_S after `started` still qualifies; later, the result is unmatched', async (t) => {
  const { app, database } = await buildTestApp(t, { database: shared, env: { CORRELATION_SKEW_S: '60' } });
  const db = database.db;
  const t0 = Date.parse('2026-11-22T05:00:00.000Z');
  const [within, beyond] = [customer('skew-in'), customer('skew-out')];
  const inside = await insertRequest(db, { customerUuid: within, status: 'submitted', submittedAt: new Date(t0 + 60_000) });
  const outside = await insertRequest(db, { customerUuid: beyond, status: 'submitted', submittedAt: new Date(t0 + 61_000) });
  const started = new Date(t0).toISOString();
  const finished = new Date(t0 + 5_000).toISOString();

  t.equal((await postCallback(app, resultBody(within, { started, finished }))).statusCode, 200);
  t.equal((await postCallback(app, resultBody(beyond, { started, finished }))).statusCode, 200);
  t.match(await requestById(db, inside), { status: 'completed' });
  t.match(await requestById(db, outside), { status: 'submitted', result_callback_id: null });
  t.match(await callbacksOf(db, beyond), [{ outcome: 'unmatched', request_id: null }]);
});

t.test('fields the provider does not document are kept only in the raw body (a CPF masked there), never in result', async (t) => {
  const { app, database } = await gateway(t);
  const db = database.db;
  const cust = customer('extra');
  await insertRequest(db, { customerUuid: cust, status: 'submitted' });
  const documented = resultBody(cust);
  const sent = { ...documented, cpf: '11144477735', response: { ...documented.response, document: '111.444.777-35' } };

  t.equal((await postCallback(app, sent)).statusCode, 200);
  const [row] = await callbacksOf(db, cust);
  t.same(row!.body, documented, 'result holds the documented fields only');
  const evidence = JSON.stringify({ ...sent, cpf: '***********', response: { ...sent.response, document: '***.***.***-**' } });
  t.equal(Buffer.from(row!.raw_body).toString('utf8'), evidence, 'the raw body is the evidence, whole but for the CPFs in it');

  const answer = await app.inject({ method: 'GET', url: `/v1/underwritings/${cust}` });
  t.equal(answer.statusCode, 200);
  t.same(answer.json().result, documented);
  t.notMatch(answer.body, /11144477735|111\.444\.777-35/, 'no CPF served back');
});

t.test('a result stored whole before, extra fields and all, is served with its documented fields only', async (t) => {
  const { app, database } = await gateway(t);
  const db = database.db;
  const cust = customer('legacy');
  const requestId = await insertRequest(db, { customerUuid: cust, status: 'submitted' });
  const documented = resultBody(cust);
  await postCallback(app, documented);
  const [row] = await callbacksOf(db, cust);
  await db.updateTable('callbacks').set({ body: JSON.stringify({ ...documented, cpf: '11144477735' }) }).where('id', '=', row!.id).execute();

  const answer = await app.inject({ method: 'GET', url: `/v1/underwritings/${cust}` });
  t.same(answer.json().result, documented);
  t.notMatch(answer.body, /11144477735/);
  t.ok(requestId);
});
