import { sql } from 'kysely';
import pg from 'pg';
import t, { type Test } from 'tap';
import { hashCpf } from '../../src/cpf.js';
import { TokenUnavailableError } from '../../src/provider/errors.js';
import { listen, TEST_CPF_HASH_KEY, TEST_PARTNER_TOKEN } from '../helpers/app.js';
import { anotherConnection, freshDatabase, SERVER_URL } from '../helpers/database.js';
import { httpRequest } from '../helpers/http.js';
import { dereference } from '../helpers/openapi.js';
import { cutSeen, databaseBehindRelay, type TcpRelay } from '../helpers/relay.js';
import { until } from '../helpers/until.js';
import { CPF, PROVIDER_PATH, type SubmitGateway, storedKeys, storedRequests, submitGateway, validRequest } from './fixtures.js';
import { accept } from './provider.js';

t.test('an accepted request answers 202, is stored as submitted and reaches the provider exactly as sent', async (t) => {
  const { submit, provider, database, logs } = await submitGateway(t);
  const body = validRequest();
  const res = await submit(body);

  t.equal(res.statusCode, 202);
  const answer = res.json();
  t.same(answer, { customerUuid: body.customerUuid, status: 'submitted', submittedAt: answer.submittedAt, upstreamStatus: 202 });
  t.match(answer.submittedAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

  t.equal(provider.received.length, 1);
  const [sent] = provider.received;
  t.equal(sent!.method, 'POST');
  t.equal(sent!.url, PROVIDER_PATH);
  t.equal(sent!.headers['x-partner-auth'], TEST_PARTNER_TOKEN);
  t.equal(sent!.headers['content-type'], 'application/json');
  t.equal(sent!.headers.authorization, undefined, 'no bearer token without a token source');
  t.equal(sent!.text, JSON.stringify(body), 'the body is byte for byte what was validated');

  const [row, ...others] = await storedRequests(database);
  t.equal(others.length, 0);
  t.match(row, {
    customer_uuid: body.customerUuid,
    cpf_hash: hashCpf(CPF, TEST_CPF_HASH_KEY),
    cpf_masked: '***.982.247-**',
    cost_saving_enabled: false,
    status: 'submitted',
    upstream_status: 202,
    upstream_error: null,
    idempotency_key: null,
    completed_at: null,
    decision: null,
  });
  t.same(row!.srd, body.srd);
  t.equal(row!.submitted_at.toISOString(), answer.submittedAt);
  t.notMatch(JSON.stringify(row), CPF, 'the CPF is not stored in clear');

  t.notMatch(logs.text(), CPF, 'the CPF is never logged');
  t.notMatch(logs.text(), TEST_PARTNER_TOKEN, 'the partner token is never logged');
});

t.test('the request is committed as submitting before the provider is called', async (t) => {
  const database = await freshDatabase(t);
  const other = await anotherConnection(t, database);
  const seen: string[] = [];
  const { submit } = await submitGateway(t, {
    database,
    handler: async (received, res) => {
      const row = await other.db.selectFrom('underwriting_requests').select('status').executeTakeFirst();
      seen.push(row?.status ?? 'nothing stored');
      accept(received, res);
    },
  });
  t.equal((await submit(validRequest())).statusCode, 202);
  t.same(seen, ['submitting'], 'another connection sees the committed row while the provider works');
});

t.test('a callback that overtakes the provider reply leaves the row completed, and the 202 still says submitted', async (t) => {
  const database = await freshDatabase(t);
  const other = await anotherConnection(t, database);
  const { submit } = await submitGateway(t, {
    database,
    handler: async (received, res) => {
      // What the callback capability does when the result arrives first.
      await other.db
        .updateTable('underwriting_requests')
        .set({ status: 'completed', completed_at: new Date(), decision: 'approved' })
        .where('status', '=', 'submitting')
        .execute();
      accept(received, res);
    },
  });
  const res = await submit(validRequest());
  t.equal(res.statusCode, 202);
  t.match(res.json(), { status: 'submitted', upstreamStatus: 202 });
  const [row] = await storedRequests(database);
  t.match(row, { status: 'completed', decision: 'approved', upstream_status: 202 });
  t.ok(row!.completed_at, 'the result is kept');
});

t.test('a customer with a request awaiting its callback gets 409 in_flight and nothing is sent', async (t) => {
  const { submit, provider, database } = await submitGateway(t);
  t.equal((await submit(validRequest())).statusCode, 202);
  const again = await submit(validRequest({ costSavingEnabled: true }));
  t.equal(again.statusCode, 409);
  t.same(again.json(), { error: 'in_flight', message: 'this customerUuid already has a request awaiting its callback' });
  t.equal(provider.received.length, 1, 'the provider got only the first');
  t.same((await storedRequests(database)).map((r) => r.status), ['submitted']);
});

t.test('a customer whose previous request failed or completed may submit again', async (t) => {
  let answer = 500;
  const { submit, provider, database } = await submitGateway(t, {
    handler: (_received, res) => void res.writeHead(answer).end(),
  });
  t.equal((await submit(validRequest())).statusCode, 502);
  answer = 202;
  t.equal((await submit(validRequest())).statusCode, 202, 'after submit_failed');
  await database.db.updateTable('underwriting_requests').set({ status: 'completed' }).where('status', '=', 'submitted').execute();
  t.equal((await submit(validRequest())).statusCode, 202, 'after completed');
  t.equal(provider.received.length, 3);
  t.same((await storedRequests(database)).map((r) => r.status), ['submit_failed', 'completed', 'submitted']);
});

t.test('8 concurrent submits of one customer cause exactly one upstream call', async (t) => {
  const database = await freshDatabase(t);
  const second = await anotherConnection(t, database);
  const one = await submitGateway(t, { database });
  const two = await submitGateway(t, { database: second });
  const answers = await Promise.all(
    Array.from({ length: 8 }, (_, i) => (i % 2 === 0 ? one : two).submit(validRequest({ costSavingEnabled: i % 3 === 0 }))),
  );
  const statuses = answers.map((a) => a.statusCode).sort();
  t.same(statuses, [202, 409, 409, 409, 409, 409, 409, 409]);
  t.equal(one.provider.received.length + two.provider.received.length, 1, 'one call across both instances');
  t.same((await storedRequests(database)).map((r) => r.status), ['submitted']);
});

t.test('a real peer outside the allowlist is refused 403, also with a forged X-Forwarded-For; nothing stored or sent', async (t) => {
  const { app, provider, database } = await submitGateway(t, { env: { SUBMIT_ALLOWED_IPS: '127.0.0.1/32' } });
  const base = await listen(app);
  for (const headers of [{}, { 'x-forwarded-for': '127.0.0.1' }] as Array<Record<string, string>>) {
    const res = await httpRequest(`${base}/v1/underwritings`, { localAddress: '127.0.0.2', headers, body: validRequest() });
    t.equal(res.status, 403);
    t.same(res.json, { error: 'forbidden', message: 'this address may not use this route' });
  }
  const inside = await httpRequest(`${base}/v1/underwritings`, { body: validRequest({ customerUuid: 'inside' }) });
  t.equal(inside.status, 202, 'an allowed peer gets through');
  t.equal(provider.received.length, 1);
  t.same((await storedRequests(database)).map((r) => r.customer_uuid), ['inside']);
});

t.test('an oversized body is refused 413 before parsing; nothing stored or sent', async (t) => {
  const { app, provider, database } = await submitGateway(t);
  const base = await listen(app);
  const huge = JSON.stringify({ ...validRequest(), srd: { grossIncome: 1, address: { street: 'x'.repeat(70 * 1024) } } });
  const res = await httpRequest(`${base}/v1/underwritings`, { body: huge });
  t.equal(res.status, 413);
  t.same(res.json, { error: 'payload_too_large', message: 'the request body is too large' });
  t.equal(provider.received.length, 0);
  t.equal((await storedRequests(database)).length, 0);
});

t.test('with a token source, the provider call also carries the bearer token', async (t) => {
  const { submit, provider, logs } = await submitGateway(t, { tokenSource: { getToken: async () => 'bearer-token-value-123' } });
  t.equal((await submit(validRequest())).statusCode, 202);
  t.equal(provider.received[0]!.headers.authorization, 'Bearer bearer-token-value-123');
  t.equal(provider.received[0]!.headers['x-partner-auth'], TEST_PARTNER_TOKEN);
  t.notMatch(logs.text(), 'bearer-token-value-123');
});

t.test('a bearer token that cannot be obtained answers 502 upstream_auth_failed, stored submit_failed, nothing sent', async (t) => {
  const { submit, provider, database } = await submitGateway(t, {
    tokenSource: { getToken: async () => Promise.reject(new TokenUnavailableError('token endpoint answered 401')) },
  });
  const res = await submit(validRequest());
  t.equal(res.statusCode, 502);
  t.same(res.json(), {
    error: 'upstream_auth_failed',
    message: 'no bearer token could be obtained for the provider; nothing was sent',
  });
  t.equal(provider.received.length, 0);
  const [row] = await storedRequests(database);
  t.match(row, { status: 'submit_failed', upstream_status: null, upstream_error: 'bearer token unavailable: token endpoint answered 401' });
});

t.test('metrics count submit outcomes and time the upstream calls', async (t) => {
  const { app, submit } = await submitGateway(t);
  await submit(validRequest());
  await submit(validRequest());
  await submit({ nope: true });
  const text = (await app.inject({ method: 'GET', url: '/metrics' })).body;
  t.match(text, /underwriting_submissions_total\{outcome="submitted"\} 1/);
  t.match(text, /underwriting_submissions_total\{outcome="in_flight"\} 1/);
  t.match(text, /underwriting_submissions_total\{outcome="invalid"\} 1/);
  t.match(text, /upstream_request_duration_seconds_count\{outcome="accepted"\} 1/);
});

t.test('the OpenAPI document describes the submit route from the validating schemas', async (t) => {
  const { app } = await submitGateway(t);
  const spec = (await app.inject({ method: 'GET', url: '/docs/json' })).json();
  const op = spec.paths['/v1/underwritings'].post;
  t.ok(dereference(spec, op.requestBody.content['application/json'].schema).properties.srd, 'the body schema is there');
  t.same(Object.keys(op.responses).sort(), ['202', '400', '403', '408', '409', '413', '415', '422', '431', '500', '502', '503', '504']);
  t.ok(op.parameters.some((p: { in: string; name: string }) => p.in === 'header' && p.name === 'idempotency-key'));
});

if (SERVER_URL) {
  t.test('with the database unreachable the submit answers 503 and the provider receives nothing', async (t) => {
    const { database, relay } = await databaseBehindRelay(t);
    const { submit, provider } = await submitGateway(t, { database });

    relay.cut();
    for (const headers of [{}, { 'idempotency-key': 'while-down' }] as Array<Record<string, string>>) {
      const res = await submit(validRequest(), headers);
      t.equal(res.statusCode, 503);
      t.same(res.json(), { error: 'storage_unavailable', message: 'the database is unavailable; try again shortly' });
    }
    t.equal(provider.received.length, 0);

    relay.restore();
    const later = await submit(validRequest(), { 'idempotency-key': 'while-down' });
    t.equal(later.statusCode, 202, 'a 503 is never recorded against the key');
    t.equal(provider.received.length, 1);
    t.equal((await storedKeys(database))[0]!.response_status, 202);
  });

  t.test('a provider acceptance is still reported when the database fails during the call', async (t) => {
    const { database, relay } = await databaseBehindRelay(t);
    const { submit } = await submitGateway(t, {
      database,
      handler: (received, res) => {
        relay.cut();
        accept(received, res);
      },
    });
    const res = await submit(validRequest());
    t.equal(res.statusCode, 202, 'not 503: the provider has the request');
    t.match(res.json(), { status: 'submitted', upstreamStatus: 202 });
    relay.restore();
    await cutSeen();
    const [row] = await storedRequests(database);
    t.match(row, { status: 'submitting' }, 'the row awaits its callback, which matches submitting rows too');
  });

  /**
   * A submit whose insert commits but whose answer is lost: the relay swallows the database's
   * answers from the insert on, and drops the connections once the row is there (seen on a direct connection).
   */
  async function submitLosingTheCommit(
    t: Test,
    gw: SubmitGateway,
    relay: TcpRelay,
    url: string,
    headers: Record<string, string> = {},
    /** The blink leaves the pool's idle connections open, to die when next used (else cut with the submit's). */
    idleDieOnUse = false,
  ) {
    const direct = new pg.Client({ connectionString: url });
    await direct.connect();
    t.teardown(() => direct.end());
    // The instance's passes at start (key digests, callbacks' bodies, srd text in requests and events) run on the pool too: once they
    // are over, the swallowed answers and the cut meet the submit's connections only (with the
    // body-mask pass still reading, the 503's key release met a spoilt connection: 409 for 202).
    await gw.app.ready();
    await until(async () => {
      const { rows } = await direct.query('select count(*)::int as n from maintenance_passes where finished_at is not null');
      return rows[0].n >= 4 ? true : undefined;
    }, 10_000, 'the passes at start');
    const before = (await storedRequests(gw.database)).length;
    relay.blackhole('insert_submitting'); // right after the insert is sent
    const answer = gw.submit(validRequest(), headers);
    const count = async () => Number((await direct.query('select count(*) as n from underwriting_requests')).rows[0].n);
    await until(async () => (await count()) !== before, 10_000, 'the submit\'s committed row');
    // The connection dies after the commit; new ones get through (a backend ended, a flaky link).
    if (idleDieOnUse) relay.cutBusyLeavingIdleToDie();
    else relay.cut();
    relay.restore();
    const res = await answer;
    await cutSeen();
    return res;
  }

  t.test('a 503 submit whose row was committed holds its customer only until the abandoned bound, and never reaches the provider twice', async (t) => {
    const { database, relay, url } = await databaseBehindRelay(t);
    let skewMs = 0;
    const gw = await submitGateway(t, { database, clock: () => new Date(Date.now() + skewMs) });
    await storedRequests(database); // a pooled connection is open before the answers are swallowed

    const lost = await submitLosingTheCommit(t, gw, relay, url);
    t.equal(lost.statusCode, 503, 'the submit could not know its row was stored');
    t.match(await storedRequests(database), [{ status: 'submitting' }], 'but it was');
    t.equal(gw.provider.received.length, 0);

    const soon = await gw.submit(validRequest());
    t.equal(soon.statusCode, 409, 'within the bound a submit may still be live');

    skewMs = 12_001; // UPSTREAM_TIMEOUT_MS (2 s in tests) + twice the 5 s send window, and a little
    const later = await gw.submit(validRequest());
    t.equal(later.statusCode, 202, 'past the bound the abandoned request no longer holds the customer');
    t.equal(gw.provider.received.length, 1);
    t.match(await storedRequests(database), [{ status: 'submit_failed', upstream_status: null, upstream_error: /^abandoned/ }, { status: 'submitted' }]);
  });

  t.test('a retry with the same Idempotency-Key after a 503 whose row was committed runs at once, with one provider call', async (t) => {
    const { database, relay, url } = await databaseBehindRelay(t);
    const gw = await submitGateway(t, { database });
    await storedRequests(database);

    const lost = await submitLosingTheCommit(t, gw, relay, url, { 'idempotency-key': 'retry-me' });
    t.equal(lost.statusCode, 503);
    const retry = await gw.submit(validRequest(), { 'idempotency-key': 'retry-me' });
    t.equal(retry.statusCode, 202, 'the key was free again, so its leftover row was never sent: released at once');
    const replay = await gw.submit(validRequest(), { 'idempotency-key': 'retry-me' });
    t.equal(replay.statusCode, 202);
    t.equal(replay.headers['idempotent-replayed'], 'true');
    t.equal(gw.provider.received.length, 1, 'the provider heard of this key once');
    t.match(await storedRequests(database), [{ status: 'submit_failed', upstream_error: /^not sent/ }, { status: 'submitted' }]);
  });

  t.test("a 503's key is freed though every idle connection of the pool died in the same blink, unseen until used", async (t) => {
    const { database, relay, url } = await databaseBehindRelay(t);
    const gw = await submitGateway(t, { database });
    // Idle connections in the pool, as a busy instance has: each will fail the first statement it is given.
    await Promise.all(Array.from({ length: 10 }, () => sql`select pg_sleep(0.05)`.execute(database.db)));

    const lost = await submitLosingTheCommit(t, gw, relay, url, { 'idempotency-key': 'blink' }, true);
    t.equal(lost.statusCode, 503);
    const direct = new pg.Client({ connectionString: url });
    await direct.connect();
    t.teardown(() => direct.end());
    t.equal((await direct.query('select count(*)::int as n from idempotency_keys')).rows[0].n, 0, 'the key was freed, on a connection past the dead ones');
    // Any dead connection still idle (another user of the pool may have put a live one above them)
    // is drawn and dropped here, so the retry below meets none.
    await Promise.allSettled(Array.from({ length: 8 }, () => sql`select 1`.execute(database.db)));
    const retry = await gw.submit(validRequest(), { 'idempotency-key': 'blink' });
    t.equal(retry.statusCode, 202, 'so a retry runs the request at once');
    t.equal(gw.provider.received.length, 1);
  });

  t.test('a key whose 503 could not even free it is taken over past the bound and answered from its row, never sent twice', async (t) => {
    const { database, relay, url } = await databaseBehindRelay(t);
    let skewMs = 0;
    const gw = await submitGateway(t, { database, clock: () => new Date(Date.now() + skewMs) });
    await storedRequests(database);
    const direct = new pg.Client({ connectionString: url });
    await direct.connect();
    t.teardown(() => direct.end());

    relay.blackhole('insert_submitting');
    const answer = gw.submit(validRequest(), { 'idempotency-key': 'stuck' });
    await until(
      async () => Number((await direct.query('select count(*) as n from underwriting_requests')).rows[0].n) !== 0,
      10_000,
      'the submit\'s committed row',
    );
    relay.cut(); // and it stays down while the submit answers: the key cannot be freed
    t.equal((await answer).statusCode, 503);
    relay.restore();
    await cutSeen();

    skewMs = 12_001;
    const retry = await gw.submit(validRequest(), { 'idempotency-key': 'stuck' });
    t.equal(retry.statusCode, 504, 'its fate at the provider is unknown to the key: never risk a second call');
    const other = await gw.submit(validRequest());
    t.equal(other.statusCode, 202, 'the customer is not held');
    t.equal(gw.provider.received.length, 1, 'only the new submit reached the provider');
  });
}
