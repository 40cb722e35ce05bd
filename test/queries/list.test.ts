import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import t from 'tap';
import { hashCpf, maskCpf } from '../../src/cpf.js';
import { cursorCodec } from '../../src/http/cursor.js';
import { buildTestApp, TEST_CPF_HASH_KEY } from '../helpers/app.js';
import { CPF, emptyTables, insertRequest, OTHER_CPF, distinctResult } from './fixtures.js';
import { freshDatabase } from '../helpers/database.js';

// One database for the file, emptied before each test: a fresh PGlite costs seconds.
const database = await freshDatabase(t);
t.beforeEach(() => emptyTables(database.db));

async function get(app: FastifyInstance, url: string) {
  const res = await app.inject({ method: 'GET', url });
  return { status: res.statusCode, body: res.json() };
}

t.test('the list is newest first and filters by status, decision, since (inclusive) and until (exclusive)', async (t) => {
  const { app } = await buildTestApp(t, { database });
  const db = database.db;
  await insertRequest(db, { customerUuid: 'a', submittedAt: '2026-01-01T00:00:00Z', result: distinctResult('a', { limit: 0 }) });
  await insertRequest(db, { customerUuid: 'b', submittedAt: '2026-01-02T00:00:00Z', result: distinctResult('b') });
  await insertRequest(db, { customerUuid: 'c', submittedAt: '2026-01-03T00:00:00Z', status: 'submit_failed', upstreamStatus: 422 });
  await insertRequest(db, { customerUuid: 'd', submittedAt: '2026-01-04T00:00:00Z' });
  await insertRequest(db, { customerUuid: 'e', submittedAt: '2026-01-05T00:00:00Z', result: distinctResult('e', { limit: 9000 }) });

  const all = await get(app, '/v1/underwritings');
  t.equal(all.status, 200);
  t.same(all.body.items.map((i: { customerUuid: string }) => i.customerUuid), ['e', 'd', 'c', 'b', 'a']);
  t.equal(all.body.nextCursor, null, 'one page only');
  t.match(all.body.items[0], { status: 'completed', decision: 'approved', result: { customerUuid: 'e' } });

  const names = async (query: string) =>
    (await get(app, `/v1/underwritings?${query}`)).body.items.map((i: { customerUuid: string }) => i.customerUuid);
  t.same(await names('status=completed'), ['e', 'b', 'a']);
  t.same(await names('status=submit_failed'), ['c']);
  t.same(await names('decision=approved'), ['e', 'b']);
  t.same(await names('decision=declined'), ['a']);
  t.same(await names('since=2026-01-02T00:00:00Z'), ['e', 'd', 'c', 'b'], 'since is inclusive');
  t.same(await names('until=2026-01-04T00:00:00Z'), ['c', 'b', 'a'], 'until is exclusive');
  t.same(await names('since=2026-01-02&until=2026-01-04'), ['c', 'b'], 'bare dates are midnight UTC');
  t.same(await names('since=2026-01-02T01:00:00%2B01:00&until=2026-01-03T00:00:00.000001Z'), ['c', 'b'], 'offsets count');
  t.same(await names('status=completed&decision=approved&since=2026-01-03T00:00:00Z'), ['e'], 'filters combine');
  t.same(await names('status=expired'), []);
});

t.test('invalid filters and limits are 400 validation_failed', async (t) => {
  const { app } = await buildTestApp(t, { database });
  for (const query of [
    'limit=0',
    'limit=501',
    'limit=x',
    'limit=-1',
    'limit=1.5',
    'limit=',
    'status=done',
    'decision=maybe',
    'since=yesterday',
    'until=2026-13-01T00:00:00Z',
    'since=2026-01-01T00:00:00',
    'colour=blue',
    'since=0000-01-01T00:00:00Z',
    'until=0000-12-31',
  ]) {
    const res = await get(app, `/v1/underwritings?${query}`);
    t.equal(res.status, 400, query);
    t.equal(res.body.error, 'validation_failed', query);
  }
  t.equal((await get(app, '/v1/underwritings?limit=1')).status, 200);
  t.equal((await get(app, '/v1/underwritings?limit=500')).status, 200);
});

t.test('a time zone offset beyond ±15:59, which PostgreSQL cannot read, is 400 validation_failed', async (t) => {
  const { app } = await buildTestApp(t, { database });
  for (const query of ['since=2024-01-01T00:00:00%2B16:00', 'until=2024-01-01T00:00:00-16:00', 'since=2024-01-01T00:00:00%2B23:59']) {
    const res = await get(app, `/v1/underwritings?${query}`);
    t.equal(res.status, 400, query);
    t.match(res.body, { error: 'validation_failed', issues: [{ path: query.slice(0, 5) }] }, query);
  }
  t.equal((await get(app, '/v1/underwritings?since=2024-01-01T00:00:00%2B15:59')).status, 200, '+15:59 is fine');
  t.equal((await get(app, '/v1/underwritings?until=2024-01-01T00:00:00-15:59')).status, 200, '-15:59 is fine');
});

t.test('following nextCursor walks every row exactly once, in order, even among equal submittedAt', async (t) => {
  const { app } = await buildTestApp(t, { database });
  const db = database.db;
  // 137 rows: groups of up to 7 share one submitted_at (microseconds included), so ids break the ties.
  await sql`
    insert into underwriting_requests (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, status, submitted_at)
    select 'walk-' || g, 'h', '***.000.000-**', false, 'completed',
           timestamptz '2026-05-01 00:00:00.123456+00' + (g / 7) * interval '1.000001 second'
      from generate_series(1, 137) as g`.execute(db);
  const expected = (
    await db.selectFrom('underwriting_requests').select('customer_uuid').orderBy('submitted_at', 'desc').orderBy('id', 'desc').execute()
  ).map((r) => r.customer_uuid);

  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const query: string = cursor ? `limit=10&cursor=${encodeURIComponent(cursor)}` : 'limit=10';
    const res = await get(app, `/v1/underwritings?${query}`);
    t.equal(res.status, 200);
    seen.push(...res.body.items.map((i: { customerUuid: string }) => i.customerUuid));
    cursor = res.body.nextCursor;
    pages += 1;
  } while (cursor && pages < 50);
  t.equal(pages, 14);
  t.equal(seen.length, 137);
  t.equal(new Set(seen).size, 137, 'no row twice');
  t.same(seen, expected, 'newest first, ids breaking ties');

  const exact = await get(app, '/v1/underwritings?limit=137');
  t.equal(exact.body.items.length, 137);
  t.equal(exact.body.nextCursor, null, 'no cursor when the page holds the last row');
});

t.test('a cursor keeps the filters it is used with', async (t) => {
  const { app } = await buildTestApp(t, { database });
  for (let i = 0; i < 6; i++) {
    await insertRequest(database.db, {
      customerUuid: `f-${i}`,
      submittedAt: `2026-02-0${i + 1}T00:00:00Z`,
      ...(i % 2 === 0 ? { result: distinctResult(`f-${i}`) } : { status: 'expired' as const }),
    });
  }
  const first = await get(app, '/v1/underwritings?status=expired&limit=2');
  t.same(first.body.items.map((i: { customerUuid: string }) => i.customerUuid), ['f-5', 'f-3']);
  const second = await get(app, `/v1/underwritings?status=expired&limit=2&cursor=${first.body.nextCursor}`);
  t.same(second.body.items.map((i: { customerUuid: string }) => i.customerUuid), ['f-1']);
  t.equal(second.body.nextCursor, null);
});

t.test('a forged or garbled cursor is 400 validation_failed', async (t) => {
  const { app } = await buildTestApp(t, { database });
  await insertRequest(database.db, { customerUuid: 'x1', submittedAt: '2026-01-01T00:00:00Z' });
  await insertRequest(database.db, { customerUuid: 'x2', submittedAt: '2026-01-02T00:00:00Z' });
  const genuine = (await get(app, '/v1/underwritings?limit=1')).body.nextCursor as string;
  t.type(genuine, 'string');
  t.equal((await get(app, `/v1/underwritings?limit=1&cursor=${genuine}`)).status, 200);

  const [payload, signature] = genuine.split('.') as [string, string];
  const forgedPayload = Buffer.from(JSON.stringify({ t: '2030-01-01T00:00:00.000000Z', id: 1 })).toString('base64url');
  const otherKey = cursorCodec('some-other-secret-0123456789abcdef').encode({ t: '2030-01-01T00:00:00.000000Z', id: 1 });
  const injection = Buffer.from(JSON.stringify({ t: "x'); drop table callbacks; --", id: 1 })).toString('base64url');
  for (const cursor of [
    `${forgedPayload}.${signature}`,
    otherKey,
    `${injection}.${signature}`,
    payload,
    'garbage',
    `${payload}.${signature}x`,
    '%00',
    'a'.repeat(400),
  ]) {
    const res = await get(app, `/v1/underwritings?cursor=${encodeURIComponent(cursor)}`);
    t.equal(res.status, 400, cursor);
    t.equal(res.body.error, 'validation_failed');
  }
  const garbled = await get(app, `/v1/underwritings?cursor=${otherKey}`);
  t.same(garbled.body.issues, [{ path: 'cursor', message: 'not a cursor issued by this service' }]);
  t.ok(await database.db.selectFrom('callbacks').select('id').execute(), 'tables intact');
});

t.test('a correctly signed cursor of the wrong shape is still refused', async (t) => {
  const { app } = await buildTestApp(t, { database });
  const codec = cursorCodec(TEST_CPF_HASH_KEY);
  const wrongShape = codec.encode({ t: '2026-01-01', id: 1 });
  const res = await get(app, `/v1/underwritings?cursor=${wrongShape}`);
  t.equal(res.status, 400);
  const right = codec.encode({ t: '2026-01-01T00:00:00.000000Z', id: 1 });
  t.equal((await get(app, `/v1/underwritings?cursor=${right}`)).status, 200, 'cursors are valid on any instance with the same key');
});

t.test('lookup by CPF finds every request of that CPF, across customers, paged like the list', async (t) => {
  const { app } = await buildTestApp(t, { database });
  const db = database.db;
  await insertRequest(db, { customerUuid: 'first-customer', cpf: CPF, submittedAt: '2026-01-01T00:00:00Z', result: distinctResult('first-customer') });
  await insertRequest(db, { customerUuid: 'second-customer', cpf: CPF, submittedAt: '2026-01-02T00:00:00Z' });
  await insertRequest(db, { customerUuid: 'stranger', cpf: OTHER_CPF, submittedAt: '2026-01-03T00:00:00Z' });

  const res = await app.inject({ method: 'POST', url: '/v1/underwritings/lookup', payload: { cpf: CPF } });
  t.equal(res.statusCode, 200);
  const body = res.json();
  t.same(body.items.map((i: { customerUuid: string }) => i.customerUuid), ['second-customer', 'first-customer']);
  t.equal(body.items[0].cpfMasked, maskCpf(CPF));
  t.match(body.items[1], { status: 'completed', result: { customerUuid: 'first-customer' } });
  t.equal(body.nextCursor, null);
  t.ok(await db.selectFrom('underwriting_requests').where('cpf_hash', '=', hashCpf(CPF, TEST_CPF_HASH_KEY)).select('id').execute());

  const page1 = (await app.inject({ method: 'POST', url: '/v1/underwritings/lookup', payload: { cpf: CPF, limit: 1 } })).json();
  t.same(page1.items.map((i: { customerUuid: string }) => i.customerUuid), ['second-customer']);
  const page2 = (
    await app.inject({ method: 'POST', url: '/v1/underwritings/lookup', payload: { cpf: CPF, limit: 1, cursor: page1.nextCursor } })
  ).json();
  t.same(page2.items.map((i: { customerUuid: string }) => i.customerUuid), ['first-customer']);
  t.equal(page2.nextCursor, null);

  const viaQuery = await app.inject({ method: 'POST', url: '/v1/underwritings/lookup?limit=1', payload: { cpf: CPF } });
  t.equal(viaQuery.json().items.length, 1, 'limit may also come in the query string');

  const none = await app.inject({ method: 'POST', url: '/v1/underwritings/lookup', payload: { cpf: '00000000191' } });
  t.same(none.json(), { items: [], nextCursor: null });
});

t.test('a lookup body must be exactly {cpf} with an 11-digit string', async (t) => {
  const { app } = await buildTestApp(t, { database });
  for (const payload of [{}, { cpf: 52998224725 }, { cpf: '529.982.247-25' }, { cpf: '5299822472' }, { cpf: CPF, name: 'x' }, { cpf: CPF, limit: 0 }, { cpf: CPF, limit: 501 }]) {
    const res = await app.inject({ method: 'POST', url: '/v1/underwritings/lookup', payload });
    t.equal(res.statusCode, 400, JSON.stringify(payload));
    t.equal(res.json().error, 'validation_failed');
    t.notMatch(res.body, CPF, 'the CPF is not echoed back');
  }
  const notJson = await app.inject({ method: 'POST', url: '/v1/underwritings/lookup', payload: 'cpf=1', headers: { 'content-type': 'text/plain' } });
  t.equal(notJson.statusCode, 415, 'a body that is not JSON is refused');
  t.equal(notJson.json().error, 'unsupported_media_type');
});
