import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import t, { type Test } from 'tap';
import { customer } from '../callbacks/fixtures.js';
import pg from 'pg';
import { openDatabase } from '../../src/db/database.js';
import { SERVER_URL, anotherConnection, freshDatabase, freshDatabaseUrl } from '../helpers/database.js';
import { adminGateway, call, stray } from './admin.js';
import { until } from './fixtures.js';

// An endpoint's maxInFlight: at most that many attempts to it in flight at once, across every
// instance, against a real slow receiver on 127.0.0.1 that counts what it holds at once.

const shared = await freshDatabase(t);

/** A real receiver on 127.0.0.1 that answers each request after `delayMs`, counting how many it holds at once. */
async function slowReceiver(t: Test, delayMs: number) {
  const state = { current: 0, max: 0, customers: [] as string[] };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      state.current++;
      state.max = Math.max(state.max, state.current);
      setTimeout(() => {
        state.current--;
        state.customers.push(JSON.parse(Buffer.concat(chunks).toString('utf8')).data.customerUuid);
        res.end();
      }, delayMs);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, state };
}

t.test('maxInFlight is set, read, changed and validated through the API', async (t) => {
  const { app } = await adminGateway(t, shared);
  const created = await call(app, 'POST', '/v1/endpoints', { url: 'http://127.0.0.1:9/cap', maxInFlight: 5 });
  t.equal(created.status, 201);
  t.equal(created.body.maxInFlight, 5);
  const id = created.body.id as string;
  t.teardown(() => call(app, 'DELETE', `/v1/endpoints/${id}`));
  t.equal((await call(app, 'GET', `/v1/endpoints/${id}`)).body.maxInFlight, 5);
  t.equal((await call(app, 'PATCH', `/v1/endpoints/${id}`, { maxInFlight: 100 })).body.maxInFlight, 100);
  t.equal((await call(app, 'PATCH', `/v1/endpoints/${id}`, { maxInFlight: null })).body.maxInFlight, null);
  t.equal((await call(app, 'POST', '/v1/endpoints', { url: 'http://127.0.0.1:9/cap2' })).body.maxInFlight, null, 'none by default');
  for (const bad of [0, 101, 1.5, '3']) {
    const res = await call(app, 'POST', '/v1/endpoints', { url: 'http://127.0.0.1:9/cap3', maxInFlight: bad });
    t.equal(res.status, 400, `maxInFlight ${JSON.stringify(bad)}`);
    t.equal(res.body.error, 'validation_failed');
  }
  t.equal((await call(app, 'PATCH', `/v1/endpoints/${id}`, { maxInFlight: 0 })).status, 400);
  await call(app, 'DELETE', `/v1/endpoints/${(await call(app, 'GET', '/v1/endpoints')).body.items.find((e: any) => e.url === 'http://127.0.0.1:9/cap2').id}`);
});

t.test('maxInFlight holds across two instances sharing the database: a slow receiver never holds more at once', async (t) => {
  const receiver = await slowReceiver(t, 300);
  const { app: a } = await adminGateway(t, shared);
  const { app: b } = await adminGateway(t, await anotherConnection(t, shared));
  const created = await call(a, 'POST', '/v1/endpoints', { url: receiver.url, maxInFlight: 3, types: ['callback.unmatched'] });
  const id = created.body.id as string;
  t.teardown(() => call(a, 'DELETE', `/v1/endpoints/${id}`));
  await until(async () => ((await call(b, 'GET', `/v1/endpoints/${id}`)).body?.maxInFlight === 3 ? true : undefined));
  // 40 customers' events, recorded half on each instance: without the cap (each instance may have
  // 64 in flight) they all arrive within a few hundred milliseconds, most at once.
  const custs = Array.from({ length: 40 }, (_, i) => customer(`cap-${i}`));
  const began = Date.now();
  await Promise.all(custs.map((c, i) => stray(i % 2 === 0 ? a : b, c)));
  await until(() => custs.every((c) => receiver.state.customers.includes(c)), 30_000, 'every event at the slow receiver');
  const tookMs = Date.now() - began;
  t.ok(receiver.state.max <= 3, `at most ${receiver.state.max} requests in flight at once (maxInFlight 3)`);
  t.equal(receiver.state.max, 3, 'and the cap was used');
  t.ok(tookMs >= (40 / 3) * 300 - 300, `40 events at 300 ms each, 3 at a time, took ${tookMs} ms`);
  // Every slot was given back: the row holds no instance's reservation.
  await until(async () => {
    const row = await shared.db.selectFrom('event_endpoints').select('in_flight').where('id', '=', id).executeTakeFirstOrThrow();
    return Object.keys(row.in_flight).length === 0 ? true : undefined;
  }, 5000, 'the in-flight slots given back');
  t.pass('the slots were given back');
});

t.test("the slots of an instance that died holding them count no more once its reservation runs out", async (t) => {
  const receiver = await slowReceiver(t, 200);
  const { app } = await adminGateway(t, shared);
  const created = await call(app, 'POST', '/v1/endpoints', { url: receiver.url, maxInFlight: 2, types: ['callback.unmatched'] });
  const id = created.body.id as string;
  t.teardown(() => call(app, 'DELETE', `/v1/endpoints/${id}`));
  // A holder that died holding both slots, its reservation running out in 2 s (from before the
  // update: a slow host's update took part of those 2 s, after which 1.5 s was no longer ahead).
  const began = Date.now();
  const until2s = new Date(began + 2000).toISOString();
  await sql`update event_endpoints set in_flight = jsonb_build_object('dead-holder', jsonb_build_object('n', 2, 'until', ${until2s}::timestamptz))
            where id = ${id}`.execute(shared.db);
  const cust = customer('cap-dead-holder');
  await stray(app, cust);
  await until(() => receiver.state.customers.includes(cust), 15_000, 'the event at the receiver');
  t.ok(Date.now() - began >= 1500, `sent ${Date.now() - began} ms later: once the dead holder's slots ran out`);
});

// A reservation that commits after the worker gave up on it (its query timed out on the client,
// with no server statement_timeout, as behind a transaction pooler) held a slot no one gave back,
// renewed for ever by the worker's own polling: a capped endpoint received nothing more. The
// worker's writes are absolute counts now, so its next write undoes what it never learnt of.
// PostgreSQL only: a second server connection holds the endpoint's row.
if (SERVER_URL) t.test('a reservation committed after its query timed out leaves no phantom slot', async (t) => {
  const url = await freshDatabaseUrl(t, { migrated: true });
  // 3 s: the timeout applies to every statement, the endpoint's creation too, which took longer than
  // 400 ms on a loaded host; the lock below outlasts any timeout.
  const queryTimeoutMs = 3000;
  const database = await openDatabase({ databaseUrl: url, dataDir: 'memory://', poolMode: 'transaction', queryTimeoutMs });
  t.teardown(() => database.close());
  const receiver = await slowReceiver(t, 0);
  const { app, logs } = await adminGateway(t, database);
  const created = await call(app, 'POST', '/v1/endpoints', { url: receiver.url, maxInFlight: 1, types: ['callback.unmatched'] });
  const id = created.body.id as string;
  const locker = new pg.Client({ connectionString: url });
  await locker.connect();
  t.teardown(() => locker.end());
  const inFlight = async () => (await locker.query('select in_flight from event_endpoints where id = $1', [id])).rows[0].in_flight;
  // The endpoint's row held by another connection for longer than the query timeout: the worker's
  // reservation times out on the client and commits once the row is free.
  await locker.query('begin');
  await locker.query('select 1 from event_endpoints where id = $1 for update', [id]);
  const first = customer('phantom-1');
  await stray(app, first);
  await until(
    () => logs.entries().some((e) => e.msg === 'could not reserve an endpoint in-flight slot; retrying'),
    queryTimeoutMs + 20_000,
    'the reservation timed out on the client',
  );
  await locker.query('commit');
  const second = customer('phantom-2');
  await stray(app, second);
  await until(() => (receiver.state.customers.length >= 2 ? true : undefined), 8000, 'both events at the receiver');
  t.same(receiver.state.customers.sort(), [first, second].sort());
  await until(async () => (Object.keys(await inFlight()).length === 0 ? true : undefined), 5000, 'every slot given back');
});
