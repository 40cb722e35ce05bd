import t, { type Test } from 'tap';
import { buildTestApp } from '../helpers/app.js';
import { freshDatabase } from '../helpers/database.js';
import { dereference } from '../helpers/openapi.js';
import {
  callbacksAfter,
  callbacksOf,
  customer,
  insertRequest,
  lastCallbackId,
  postCallback,
  requestById,
  resultBody,
} from './fixtures.js';

// One database for the file (each test has its own customers): a fresh PGlite costs seconds.
const shared = await freshDatabase(t);
const gateway = (test: Test) => buildTestApp(test, { database: shared });

interface BadBody {
  name: string;
  body: (cust: string) => string | Buffer;
  contentType?: string | null;
  issues: Array<{ path: string; message: RegExp }>;
  /** customer_uuid is kept when it is recognisable. */
  keepsCustomer: boolean;
}

const valid = (cust: string) => resultBody(cust);
const withResponse = (cust: string, change: Record<string, unknown>) => {
  const body = valid(cust);
  return JSON.stringify({ ...body, response: { ...body.response, ...change } });
};

const badBodies: BadBody[] = [
  {
    name: 'broken JSON',
    body: (cust) => JSON.stringify(valid(cust)).slice(0, -7),
    issues: [{ path: '', message: /^not JSON/ }],
    keepsCustomer: false,
  },
  {
    name: 'missing fields',
    body: (cust) => JSON.stringify({ customerUuid: cust, serviceType: 'CREDIT_SCORE' }),
    issues: [
      { path: 'started', message: /.+/ },
      { path: 'finished', message: /.+/ },
      { path: 'response', message: /.+/ },
    ],
    keepsCustomer: true,
  },
  {
    name: 'wrong types',
    body: (cust) => withResponse(cust, { score: '712', costSavingEnabled: 'false' }),
    issues: [
      { path: 'response.costSavingEnabled', message: /.+/ },
      { path: 'response.score', message: /.+/ },
    ],
    keepsCustomer: true,
  },
  {
    name: 'another serviceType',
    body: (cust) => JSON.stringify({ ...valid(cust), serviceType: 'FRAUD_CHECK' }),
    issues: [{ path: 'serviceType', message: /.+/ }],
    keepsCustomer: true,
  },
  {
    name: 'a fractional riskBand',
    body: (cust) => withResponse(cust, { riskBand: 2.5 }),
    issues: [{ path: 'response.riskBand', message: /integer/ }],
    keepsCustomer: true,
  },
  {
    name: 'a date-time that is no date',
    body: (cust) => JSON.stringify({ ...valid(cust), started: '2026-02-30T03:00:00Z' }),
    issues: [{ path: 'started', message: /ISO 8601/ }],
    keepsCustomer: true,
  },
  {
    name: 'an empty body',
    body: () => '',
    issues: [{ path: '', message: /empty/ }],
    keepsCustomer: false,
  },
  {
    name: 'an empty body without a content type',
    body: () => '',
    contentType: null,
    issues: [{ path: '', message: /empty/ }],
    keepsCustomer: false,
  },
  {
    name: 'a form-encoded body',
    body: (cust) => `customerUuid=${cust}&serviceType=CREDIT_SCORE`,
    contentType: 'application/x-www-form-urlencoded',
    issues: [{ path: '', message: /^not JSON/ }],
    keepsCustomer: false,
  },
  {
    name: 'bytes that are not UTF-8',
    body: () => Buffer.from([0xff, 0xfe, 0x7b, 0x00, 0x80, 0x22]),
    contentType: 'application/octet-stream',
    issues: [{ path: '', message: /^not JSON/ }],
    keepsCustomer: false,
  },
  {
    name: 'JSON that is not an object',
    body: () => '[1,2,3]',
    issues: [{ path: '', message: /.+/ }],
    keepsCustomer: false,
  },
];

for (const bad of badBodies) {
  t.test(`${bad.name} is answered 400 and its raw body is kept byte-exact`, async (t) => {
    const { app, database } = await gateway(t);
    const db = database.db;
    const cust = customer('bad');
    const requestId = await insertRequest(db, { customerUuid: cust, status: 'submitted' });
    const before = await lastCallbackId(db);
    const sent = Buffer.from(bad.body(cust));

    const res = await postCallback(app, sent, { contentType: bad.contentType });
    t.equal(res.statusCode, 400);
    const answer = res.json();
    t.match(answer, { error: 'validation_failed', message: 'the callback is not a valid underwriting result' });
    for (const issue of bad.issues) {
      t.ok(
        answer.issues.some((i: { path: string; message: string }) => i.path === issue.path && issue.message.test(i.message)),
        `issue at "${issue.path}"`,
      );
    }

    const rows = await callbacksAfter(db, before);
    t.equal(rows.length, 1, 'kept');
    const row = rows[0]!;
    t.ok(Buffer.from(row.raw_body).equals(sent), 'exactly the bytes sent');
    t.match(row, { outcome: 'invalid', request_id: null, decision: null, started: null, finished: null, peer: '127.0.0.1' });
    t.equal(row.customer_uuid, bad.keepsCustomer ? cust : null);
    t.ok(row.error && row.error.length > 0, 'says why');
    for (const issue of bad.issues) if (issue.path) t.match(row.error, issue.path);
    t.match(await requestById(db, requestId), { status: 'submitted', result_callback_id: null }, 'the request still waits');
    const metrics = (await app.inject({ method: 'GET', url: '/metrics' })).body;
    t.match(metrics, /underwriting_callbacks_total\{outcome="invalid"\} 1/);
  });
}

t.test('an invalid callback does not block the valid one that follows with the same instants', async (t) => {
  const { app, database } = await gateway(t);
  const cust = customer('retry');
  const requestId = await insertRequest(database.db, { customerUuid: cust, status: 'submitted' });
  const body = resultBody(cust);
  t.equal((await postCallback(app, { ...body, serviceType: 'OTHER' })).statusCode, 400);
  t.equal((await postCallback(app, body)).statusCode, 200);
  const rows = await callbacksOf(database.db, cust);
  t.same(
    rows.map((r) => r.outcome),
    ['invalid', 'matched'],
  );
  t.match(await requestById(database.db, requestId), { status: 'completed', result_callback_id: rows[1]!.id });
});

t.test('the content type is ignored: JSON sent as text/plain, with none, or a malformed one is read', async (t) => {
  const { app, database } = await gateway(t);
  for (const contentType of ['text/plain', null, 'json', 'application/json; charset=utf-8']) {
    const cust = customer('ctype');
    const requestId = await insertRequest(database.db, { customerUuid: cust, status: 'submitted' });
    const res = await postCallback(app, JSON.stringify(resultBody(cust)), { contentType });
    t.equal(res.statusCode, 200, `content type ${contentType}`);
    t.match(await requestById(database.db, requestId), { status: 'completed' });
  }
});

t.test('unknown fields are accepted, and kept only in the raw body', async (t) => {
  const { app, database } = await gateway(t);
  const cust = customer('extra');
  await insertRequest(database.db, { customerUuid: cust, status: 'submitted' });
  const base = resultBody(cust);
  const body = { ...base, traceId: 'abc-1', response: { ...base.response, modelVersion: 'v7' } };
  t.equal((await postCallback(app, body)).statusCode, 200);
  const [row] = await callbacksOf(database.db, cust);
  t.same(row!.body, base, 'result: the documented fields');
  t.equal(Buffer.from(row!.raw_body).toString('utf8'), JSON.stringify(body), 'the evidence: everything');
  t.equal(row!.outcome, 'matched');
});

t.test('a result PostgreSQL jsonb cannot hold verbatim (NUL, lone surrogate) is matched; raw bytes stay exact', async (t) => {
  const { app, database } = await gateway(t);
  const cust = customer('nul');
  await insertRequest(database.db, { customerUuid: cust, status: 'submitted' });
  const sent = Buffer.from(JSON.stringify({ ...resultBody(cust), note: 'a\u0000b', odd: '\ud800x' }));
  t.match(sent.toString(), /\\u0000/);
  const res = await postCallback(app, sent);
  t.equal(res.statusCode, 200);
  const [row] = await callbacksOf(database.db, cust);
  t.equal(row!.outcome, 'matched');
  t.ok(Buffer.from(row!.raw_body).equals(sent));
  t.same(row!.body, resultBody(cust), 'result keeps the documented fields; the rest is in the raw bytes only');
});

t.test('a result PostgreSQL cannot hold (year 0000) is kept raw as invalid and answered 400, not 500', async (t) => {
  const { app, database } = await gateway(t);
  const cust = customer('year0');
  const requestId = await insertRequest(database.db, { customerUuid: cust, status: 'submitted' });
  const sent = Buffer.from(JSON.stringify({ ...resultBody(cust), started: '0000-01-01T00:00:00Z' }));
  const res = await postCallback(app, sent);
  t.equal(res.statusCode, 400);
  t.match(res.json(), { error: 'validation_failed', issues: [{ path: '', message: /cannot be stored/ }] });
  const rows = await callbacksOf(database.db, cust);
  t.equal(rows.length, 1);
  t.match(rows[0], { outcome: 'invalid', error: /cannot be stored/, body: null, started: null });
  t.ok(Buffer.from(rows[0]!.raw_body).equals(sent), 'exactly the bytes sent');
  t.match(await requestById(database.db, requestId), { status: 'submitted' });
});

t.test('a body over 64 KiB is refused 413 and not stored', async (t) => {
  const { app, database } = await gateway(t);
  const cust = customer('big');
  const before = await lastCallbackId(database.db);
  const res = await postCallback(app, { ...resultBody(cust), padding: 'x'.repeat(70 * 1024) });
  t.equal(res.statusCode, 413);
  t.match(res.json(), { error: 'payload_too_large' });
  t.same(await callbacksAfter(database.db, before), []);
  const metrics = (await app.inject({ method: 'GET', url: '/metrics' })).body;
  t.match(metrics, /underwriting_callbacks_total\{outcome="too_large"\} 1/);
});

t.test('other routes still parse JSON bodies: the raw-bytes parser stays inside the callback plugin', async (t) => {
  const { app } = await gateway(t);
  app.post('/probe-json', async (request) => ({ isObject: typeof request.body === 'object' && !Buffer.isBuffer(request.body) }));
  const res = await app.inject({ method: 'POST', url: '/probe-json', payload: { a: 1 } });
  t.same(res.json(), { isObject: true });
});

t.test('the OpenAPI document describes the callback body, token and answers', async (t) => {
  const { app } = await gateway(t);
  const spec = (await app.inject({ method: 'GET', url: '/docs/json' })).json();
  const route = spec.paths['/v1/callbacks/underwriting'].post;
  const schema = dereference(spec, route.requestBody.content['application/json'].schema);
  t.match(schema.required, ['customerUuid', 'started', 'finished', 'serviceType', 'response']);
  t.ok(schema.properties.response.properties.riskBand);
  // The token is the callbackToken security scheme (an apiKey in the query), which Swagger UI's Authorize fills in.
  t.same(route.security, [{ callbackToken: [] }, {}]);
  t.match(spec.components.securitySchemes.callbackToken, { type: 'apiKey', in: 'query', name: 'token' });
  t.same(Object.keys(route.responses).sort(), ['200', '400', '401', '403', '408', '413', '431', '500', '503']);
});

// A provider's callback naming a CPF as customerUuid (a bug on its side, or a probe): no request of
// ours can have one while CUSTOMER_UUID_ALLOW_CPF is off, and storing it as unmatched put the CPF
// in clear in the log, in GET /v1/callbacks and in the callback.unmatched event (feed and pushes).
t.test('a callback naming a CPF as customerUuid is kept as invalid: the CPF is in no answer, log line, listed callback or event', async (t) => {
  const { app, database, logs } = await gateway(t);
  const cpf = '39053344705';
  const before = await lastCallbackId(database.db);
  for (const customerUuid of [cpf, '390.533.447-05'.replace(/\./g, '-'), `390533447_05`]) {
    const res = await postCallback(app, JSON.stringify(resultBody(customerUuid)));
    t.equal(res.statusCode, 400, customerUuid);
    t.match(res.json().issues, [{ path: 'customerUuid', message: /is a CPF/ }]);
    t.notMatch(res.body, /390\D{0,3}533/);
  }
  const rows = await callbacksAfter(database.db, before);
  t.same(rows.map((r) => [r.outcome, r.customer_uuid, r.body]), [['invalid', null, null], ['invalid', null, null], ['invalid', null, null]], 'kept as invalid, no customer key, no jsonb copy');
  const listed = await app.inject({ method: 'GET', url: '/v1/callbacks?limit=200' });
  const events = await app.inject({ method: 'GET', url: '/v1/events?limit=500' });
  for (const [what, text] of [['the log', logs.text()], ['GET /v1/callbacks', listed.body], ['GET /v1/events', events.body]] as const) {
    t.notMatch(text, /390\D{0,3}533\D{0,3}447/, `${what} holds no part of the CPF`);
  }
  t.notMatch(events.body, /callback\.unmatched/, 'no unmatched event');
  // Invalid for another reason too: still no jsonb copy (it would hold the CPF).
  const before2 = await lastCallbackId(database.db);
  t.equal((await postCallback(app, JSON.stringify({ ...resultBody(cpf), response: 7 }))).statusCode, 400);
  t.same((await callbacksAfter(database.db, before2)).map((r) => [r.customer_uuid, r.body]), [[null, null]]);
});

t.test('with CUSTOMER_UUID_ALLOW_CPF a callback naming an 11-digit customerUuid is stored unmatched, as any other', async (t) => {
  const { app, database } = await buildTestApp(t, { database: shared, env: { CUSTOMER_UUID_ALLOW_CPF: 'true' } });
  const res = await postCallback(app, JSON.stringify(resultBody('52998224725')));
  t.equal(res.statusCode, 200, res.body);
  t.match(await callbacksOf(database.db, '52998224725'), [{ outcome: 'unmatched' }]);
});

t.test('a body that is not JSON is not quoted back: the parser\'s message is scrubbed of CPF-like digits', async (t) => {
  const { app, logs } = await gateway(t);
  const res = await postCallback(app, '[52998224725,]');
  t.equal(res.statusCode, 400);
  t.match(res.json().issues, [{ path: '', message: /^not JSON/ }]);
  t.notMatch(res.body, /52998224725/);
  const unknown = await postCallback(app, JSON.stringify({ ...resultBody(customer('field')), response: 7, '529.982.247-25': 1 }));
  t.equal(unknown.statusCode, 400);
  t.notMatch(unknown.body, /529\D{0,3}982/);
  t.notMatch(logs.text(), /529\D{0,3}982\D{0,3}247/);
});

// GET /v1/callbacks (and an export) serve a kept body's bytes decoded as UTF-8 with CPF-like runs
// masked; the mask read only visible separators, so a CPF whose digits a NUL (a body sent as UTF-16),
// a zero-width or another invisible character, or a byte that is not UTF-8 (U+FFFD) kept apart was
// served whole, though the log scrubber already read all of these as gaps.
t.test('a CPF whose digits invisible characters keep apart (UTF-16, zero-width space, a byte that is not UTF-8) is masked in the listed raw body and the export', async (t) => {
  const { app } = await buildTestApp(t, { database: shared, env: { ADMIN_API_KEYS: 'admin-key-0123456789abcdef' } });
  const cpf = '39053344705';
  const cust = customer('invisible');
  const bodies: Array<[string, Buffer]> = [
    ['UTF-16LE', Buffer.from(`{"customerUuid":"${cust}","cpf":"${cpf}"}`, 'utf16le')],
    ['zero-width space', Buffer.from(`{"customerUuid":"${cust}","cpf":"${cpf.split('').join('\u200b')}"}`, 'utf8')],
    ['soft hyphen and word joiner', Buffer.from(`{"customerUuid":"${cust}","cpf":"390\u00ad533\u2060447\u00ad05"}`, 'utf8')],
    ['Latin-1 no-break spaces', Buffer.from(`{"customerUuid":"${cust}","cpf":"390\u00a0533\u00a0447\u00a005"}`, 'latin1')],
  ];
  for (const [what, body] of bodies) t.equal((await postCallback(app, body)).statusCode, 400, what);
  const listed = await app.inject({ method: 'GET', url: '/v1/callbacks?kind=invalid&limit=200' });
  t.equal(listed.statusCode, 200);
  const exported = await app.inject({
    method: 'POST',
    url: '/v1/personal-data/export',
    headers: { authorization: 'Bearer admin-key-0123456789abcdef' },
    payload: { customerUuid: cust },
  });
  t.equal(exported.statusCode, 200);
  // The digits in order with any three characters but digits between two: what a reader reads as the CPF.
  const whole = new RegExp(cpf.split('').join(String.raw`[^0-9]{0,3}`));
  const shown = (listed.json() as { items: Array<{ rawBody: string }> }).items.map((i) => i.rawBody).filter((raw) => raw.replace(/\u0000/g, '').includes(cust));
  t.equal(shown.length, bodies.length, 'every body is listed');
  for (const raw of shown) t.notMatch(raw, whole, JSON.stringify(raw));
  t.notMatch(exported.body, whole, 'the export holds no CPF either');
});
