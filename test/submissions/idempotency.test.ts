import { pino } from 'pino';
import t from 'tap';
import { loggerOptions } from '../../src/observability/logger.js';
import { bodyHash } from '../../src/requests/idempotency.js';
import { anotherConnection, freshDatabase } from '../helpers/database.js';
import type { LogCapture } from '../helpers/logs.js';
import { keyAsStored, storedKeys, storedRequests, submitGateway, validRequest } from './fixtures.js';
import { accept } from './provider.js';

const KEY = { 'idempotency-key': 'order-2024-0001' };

t.test('a replay with the same key and body returns the first answer without calling the provider', async (t) => {
  const { submit, provider, database } = await submitGateway(t);
  const first = await submit(validRequest(), KEY);
  t.equal(first.statusCode, 202);
  t.equal(first.headers['idempotent-replayed'], undefined);

  const body = validRequest();
  const reordered = { srd: body.srd, costSavingEnabled: body.costSavingEnabled, cpf: body.cpf, customerUuid: body.customerUuid };
  const again = await submit(reordered, KEY);
  t.equal(again.statusCode, 202);
  t.same(again.json(), first.json(), 'the same body, key order aside');
  t.equal(again.headers['idempotent-replayed'], 'true');
  t.equal(provider.received.length, 1);

  const [row] = await storedRequests(database);
  t.match(row, { status: 'submitted', idempotency_key: keyAsStored(KEY['idempotency-key']) });
  const [key] = await storedKeys(database);
  t.match(key, { key: keyAsStored(KEY['idempotency-key']), body_hash: bodyHash(body), request_id: row!.id, response_status: 202 });
  t.same(key!.response_body, first.json());
});

t.test('a key whose digits happen to pass as a CPF (a random UUID, a Snowflake id) is taken and replayed like any other', async (t) => {
  // Refusing keys that hold a CPF-valid run of 11 digits was tried and taken back: 0.14% of random
  // UUIDs and 8% of 19-digit Snowflake ids hold one by chance, and a 400 is a submit lost.
  const { submit, provider } = await submitGateway(t);
  for (const [i, key] of ['54296114-921b-469d-a8e2-f674ee70b8d9', '1175873563496153088'].entries()) {
    const body = validRequest({ customerUuid: `cust-chance-${i}` });
    const first = await submit(body, { 'idempotency-key': key });
    t.equal(first.statusCode, 202, key);
    const again = await submit(body, { 'idempotency-key': key });
    t.equal(again.headers['idempotent-replayed'], 'true', `${key} replayed`);
  }
  t.equal(provider.received.length, 2, 'one call each');
});

t.test('the same key with a different body answers 422 idempotency_key_reused and sends nothing', async (t) => {
  const { submit, provider, database } = await submitGateway(t);
  t.equal((await submit(validRequest(), KEY)).statusCode, 202);
  const other = await submit(validRequest({ customerUuid: 'someone-else' }), KEY);
  t.equal(other.statusCode, 422);
  t.same(other.json(), { error: 'idempotency_key_reused', message: 'this Idempotency-Key was used with a different request body' });
  t.equal(provider.received.length, 1);
  t.equal((await storedRequests(database)).length, 1);
});

t.test('8 concurrent submits with one key, on two instances, cause one upstream call and get one answer', async (t) => {
  const lines: string[] = [];
  let waiting = 0;
  let allWaiting!: () => void;
  const sevenWaiting = new Promise<void>((resolve) => (allWaiting = resolve));
  const logger = pino(loggerOptions('trace'), {
    write: (line: string) => {
      lines.push(line);
      if (line.includes('waiting for the first request with this Idempotency-Key') && ++waiting === 7) allWaiting();
    },
  });
  const logs: LogCapture = { logger, lines, text: () => lines.join(''), entries: () => lines.map((l) => JSON.parse(l)) };
  // The provider answers only once the seven others are known to be waiting for the first.
  const handler = async (received: Parameters<typeof accept>[0], res: Parameters<typeof accept>[1]) => {
    await sevenWaiting;
    accept(received, res);
  };
  const database = await freshDatabase(t);
  const one = await submitGateway(t, { database, logs, handler });
  const two = await submitGateway(t, { database: await anotherConnection(t, database), logs, handler });

  const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => (i % 2 ? one : two).submit(validRequest(), KEY)));
  t.equal(one.provider.received.length + two.provider.received.length, 1, 'exactly one upstream call');
  t.same(answers.map((a) => a.statusCode), Array(8).fill(202));
  t.equal(new Set(answers.map((a) => a.body)).size, 1, 'every caller got the same answer');
  t.equal(answers.filter((a) => a.headers['idempotent-replayed'] === 'true').length, 7);
  t.equal((await storedRequests(database)).length, 1);
});

t.test('a rejected first attempt is replayed for its key, not retried', async (t) => {
  const { submit, provider, database } = await submitGateway(t, {
    handler: (_received, res) => void res.writeHead(503).end('maintenance'),
  });
  const first = await submit(validRequest(), KEY);
  t.equal(first.statusCode, 502);
  provider.setHandler(accept);
  const again = await submit(validRequest(), KEY);
  t.equal(again.statusCode, 502);
  t.same(again.json(), first.json());
  t.equal(again.headers['idempotent-replayed'], 'true');
  t.equal(provider.received.length, 1);
  t.same((await storedRequests(database)).map((r) => r.status), ['submit_failed']);
});

t.test('a 409 in_flight answer is replayed for its key even after the customer is free again', async (t) => {
  const { submit, provider, database } = await submitGateway(t);
  t.equal((await submit(validRequest())).statusCode, 202);
  const keyed = await submit(validRequest(), KEY);
  t.equal(keyed.statusCode, 409);
  await database.db.updateTable('underwriting_requests').set({ status: 'completed' }).execute();
  const again = await submit(validRequest(), KEY);
  t.equal(again.statusCode, 409, 'the key names that one attempt; a new attempt takes a new key');
  t.equal(again.headers['idempotent-replayed'], 'true');
  t.equal((await submit(validRequest(), { 'idempotency-key': 'fresh-key' })).statusCode, 202);
  t.equal(provider.received.length, 2);
});

t.test('an expired key is treated as absent', async (t) => {
  const { submit, provider, database } = await submitGateway(t, {
    handler: (_received, res) => void res.writeHead(500).end(),
  });
  t.equal((await submit(validRequest(), KEY)).statusCode, 502);
  await database.db.updateTable('idempotency_keys').set({ expires_at: new Date(Date.now() - 1000) }).execute();
  provider.setHandler(accept);

  const again = await submit(validRequest({ costSavingEnabled: true }), KEY);
  t.equal(again.statusCode, 202, 'a different body is fine once the key expired');
  t.equal(again.headers['idempotent-replayed'], undefined);
  t.equal(provider.received.length, 2);
  const [key, ...others] = await storedKeys(database);
  t.equal(others.length, 0);
  t.match(key, { response_status: 202, body_hash: bodyHash(validRequest({ costSavingEnabled: true })) });
  t.ok(key!.expires_at.getTime() > Date.now() + 23 * 3600 * 1000, 'valid for 24 h again');
});

t.test('expired keys are deleted opportunistically', async (t) => {
  const { submit, database } = await submitGateway(t);
  const past = new Date(Date.now() - 2 * 24 * 3600 * 1000);
  await database.db
    .insertInto('idempotency_keys')
    .values({ key: 'long-gone', body_hash: 'x', response_status: 202, response_body: '{}', created_at: past, expires_at: past })
    .execute();
  t.equal((await submit(validRequest(), KEY)).statusCode, 202);
  t.same((await storedKeys(database)).map((k) => k.key), [keyAsStored(KEY['idempotency-key'])]);
});

t.test('a key left pending by an attempt that died is taken over after its lease', async (t) => {
  const { submit, provider, database } = await submitGateway(t);
  const longAgo = new Date(Date.now() - 3600 * 1000);
  await database.db
    .insertInto('idempotency_keys')
    .values({ key: keyAsStored(KEY['idempotency-key']), body_hash: bodyHash(validRequest()), created_at: longAgo, expires_at: new Date(Date.now() + 3600_000) })
    .execute();
  const res = await submit(validRequest(), KEY);
  t.equal(res.statusCode, 202);
  t.equal(provider.received.length, 1);
  t.match((await storedKeys(database))[0], { response_status: 202 });
});

t.test('taking over an abandoned key never calls the provider again for a request it already stored', async (t) => {
  const { submit, provider, database } = await submitGateway(t);
  const longAgo = new Date(Date.now() - 3600 * 1000);
  const request = validRequest();
  const abandon = async (key: string, customerUuid: string, status: 'submitted' | 'submitting', upstreamStatus: number | null) => {
    await database.db
      .insertInto('idempotency_keys')
      .values({ key: keyAsStored(key), body_hash: bodyHash({ ...request, customerUuid }), created_at: longAgo, expires_at: new Date(Date.now() + 3600_000) })
      .execute();
    await database.db
      .insertInto('underwriting_requests')
      .values({
        customer_uuid: customerUuid,
        cpf_hash: 'h',
        cpf_masked: '***.456.789-**',
        cost_saving_enabled: false,
        status,
        upstream_status: upstreamStatus,
        idempotency_key: keyAsStored(key),
        submitted_at: longAgo,
        updated_at: longAgo,
      })
      .execute();
  };

  // The first attempt was accepted, then died before recording its answer.
  await abandon('accepted-then-died', 'cust-accepted', 'submitted', 202);
  const accepted = await submit({ ...request, customerUuid: 'cust-accepted' }, { 'idempotency-key': 'accepted-then-died' });
  t.equal(accepted.statusCode, 202);
  t.match(accepted.json(), { customerUuid: 'cust-accepted', status: 'submitted', upstreamStatus: 202, submittedAt: longAgo.toISOString() });
  t.equal(accepted.headers['idempotent-replayed'], 'true');

  // The first attempt died during the provider call: its fate at the provider is unknown.
  await abandon('died-mid-call', 'cust-unknown', 'submitting', null);
  const unknown = await submit({ ...request, customerUuid: 'cust-unknown' }, { 'idempotency-key': 'died-mid-call' });
  t.equal(unknown.statusCode, 504);
  t.equal(unknown.json().error, 'upstream_unavailable');

  t.equal(provider.received.length, 0, 'the provider was not called a second time');
  const keys = await storedKeys(database);
  t.same(keys.map((k) => k.response_status).sort(), [202, 504], 'the answers are recorded for later replays');
});

t.test('a key still pending past the wait answers 409 in_flight, recorded nowhere, nothing sent', async (t) => {
  const { submit, provider, database } = await submitGateway(t, { env: { UPSTREAM_TIMEOUT_MS: '100' } });
  // Another instance holds the key and has not answered (yet): within its lease.
  await database.db
    .insertInto('idempotency_keys')
    .values({ key: keyAsStored(KEY['idempotency-key']), body_hash: bodyHash(validRequest()), created_at: new Date(), expires_at: new Date(Date.now() + 3600_000) })
    .execute();
  const res = await submit(validRequest(), KEY);
  t.equal(res.statusCode, 409);
  t.same(res.json(), { error: 'in_flight', message: 'a request with this Idempotency-Key is still being processed; retry later' });
  t.equal(provider.received.length, 0);
  t.match((await storedKeys(database))[0], { response_status: null });
});
