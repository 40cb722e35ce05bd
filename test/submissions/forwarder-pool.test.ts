import type http from 'node:http';
import pg from 'pg';
import t from 'tap';
import { sql } from 'kysely';
import { guardedPoolOf } from '../../src/db/guarded-pool.js';
import { PACING_POOL_SIZE } from '../../src/db/handle.js';
import { RETURNS_AT_ONCE } from '../../src/provider/pacing.js';
import { FORWARD_WRITES } from '../../src/submissions/forwarder.js';
import { PACED_STATEMENTS } from '../helpers/paced-statements.js';
import { validRequest } from './fixtures.js';
import { buildTestApp } from '../helpers/app.js';
import { ENGINE, freshDatabase } from '../helpers/database.js';
import { until } from '../helpers/until.js';
import { requestOf, submitAsync } from './pacing-fixtures.js';
import { startFakeProvider } from './provider.js';

// The forwarder runs on the pacing pool (DatabaseHandle.pacingDb), not the routes' pool: however
// many forwards are in flight, their writes hold at most FORWARD_WRITES connections at once, all of
// them the pacing pool's, so a route never waits behind them.
// (PGlite has one connection and no pool: this file holds no test there.)

if (ENGINE === 'postgres') t.test("forwards whose outcomes wait on the database hold a few of the pool's connections, and a GET is still answered", async (t) => {
  const held: http.ServerResponse[] = [];
  const provider = await startFakeProvider(t, (_received, res) => void held.push(res));
  const database = await freshDatabase(t);
  // More forwards in flight than the pacing pool has connections.
  const forwards = 24;
  const { app } = await buildTestApp(t, {
    database,
    env: {
      PROVIDER_BASE_URL: provider.url,
      PROVIDER_MAX_RPS: '1000',
      PROVIDER_MAX_IN_FLIGHT: String(forwards),
      // The provider holds every forward while the test submits the rest and locks their rows: on a
      // slow host that outlasts the tests' 2 s default, and a forward that timed out is never 'submitted'.
      UPSTREAM_TIMEOUT_MS: '60000',
    },
  });
  const customers = Array.from({ length: forwards }, (_, i) => `pool-${i}`);
  for (const c of customers) t.equal((await submitAsync(app, c)).statusCode, 202);
  await provider.waitForRequests(forwards);

  // Every forward sent: their rows are locked elsewhere, so each outcome's write waits (holding its connection).
  const [locker, observer] = [new pg.Client({ connectionString: database.url }), new pg.Client({ connectionString: database.url })];
  for (const client of [locker, observer]) {
    await client.connect();
    t.teardown(() => client.end());
  }
  await locker.query('begin');
  await locker.query(`select id from underwriting_requests where status = 'submitting' for update`);
  const lockWaiters = async () =>
    (
      // Not from the locking transaction: pg_stat_activity is read once per transaction.
      await observer.query<{ n: number }>(
        `select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and application_name = 'underwriting-gateway'`,
      )
    ).rows[0]!.n;
  const answered = held.map((res) => new Promise<void>((resolve) => res.once('finish', () => resolve())));
  for (const res of held) res.writeHead(202, { 'content-type': 'application/json' }).end('{"status":"accepted"}');
  await Promise.all(answered);
  await until(async () => (await lockWaiters()) >= Math.min(forwards, FORWARD_WRITES), 10_000, 'forwards waiting on the locked rows');

  const read = await app.inject({ method: 'GET', url: `/v1/underwritings/${customers[0]}` });
  t.equal(read.statusCode, 200, 'a route gets a connection while the forwards wait');
  t.ok((await lockWaiters()) <= FORWARD_WRITES, `at most ${FORWARD_WRITES} forwards' writes wait at once (saw ${await lockWaiters()})`);
  const pacing = guardedPoolOf(database.pacingDb)!.pool;
  t.ok(pacing.totalCount - pacing.idleCount >= FORWARD_WRITES, `the waiting writes hold the pacing pool's connections (${pacing.totalCount - pacing.idleCount} of ${PACING_POOL_SIZE} checked out)`);

  await locker.query('commit');
  await until(async () => (await Promise.all(customers.map((c) => requestOf(database, c)))).every((r) => r?.status === 'submitted'), 20_000, 'every forward recorded');
});

t.test("the pacing pool holds the forwarder's writes, its loop, the pacer's ask and its returns at once", async (t) => {
  t.ok(PACING_POOL_SIZE >= FORWARD_WRITES + RETURNS_AT_ONCE + 2, `${PACING_POOL_SIZE} >= ${FORWARD_WRITES} + ${RETURNS_AT_ONCE} + 2`);
});

if (ENGINE === 'postgres') t.test("a synchronous submit's take runs on the pacing pool, and so do only the statements planned once there were tested for", async (t) => {
  const provider = await startFakeProvider(t);
  const database = await freshDatabase(t);
  const { app } = await buildTestApp(t, { database, env: { PROVIDER_BASE_URL: provider.url, PROVIDER_MAX_RPS: '1000' } });
  // One queued submit forwarded (the forwarder's statements), and the shared pace's row locked
  // elsewhere: a synchronous submit's take waits on it, holding a connection of the pacing pool.
  t.equal((await submitAsync(app, 'paced-queued')).statusCode, 202);
  await until(async () => (await requestOf(database, 'paced-queued'))?.status === 'submitted', 10_000, 'the queued submit forwarded');
  const locker = new pg.Client({ connectionString: database.url });
  await locker.connect();
  t.teardown(() => locker.end());
  await locker.query('begin');
  await locker.query('select 1 from provider_pacing for update');
  const pacing = guardedPoolOf(database.pacingDb)!.pool;
  const sync = app.inject({ method: 'POST', url: '/v1/underwritings', headers: { 'content-type': 'application/json' }, payload: JSON.stringify(validRequest({ customerUuid: 'paced-sync' })) });
  await until(async () => pacing.totalCount - pacing.idleCount >= 1 || undefined, 10_000, "the take waiting on a pacing pool's connection");
  await locker.query('commit');
  t.equal((await sync).statusCode, 202, 'the synchronous submit answered once the row is free');

  // Every statement any pacing connection prepared is one the plan tests check as a generic plan
  // made with sequential scans off (test/db/plan-states-pacing.test.ts): all of them held at once,
  // so that each is another connection.
  let everyHeld!: () => void;
  let release!: () => void;
  const held = new Promise<void>((resolve) => (everyHeld = resolve));
  const released = new Promise<void>((resolve) => (release = resolve));
  let holding = 0;
  const holders = Array.from({ length: PACING_POOL_SIZE }, () =>
    database.pacingDb.connection().execute(async (conn) => {
      const { rows } = await sql<{ name: string }>`select name from pg_prepared_statements`.execute(conn);
      if (++holding === PACING_POOL_SIZE) everyHeld();
      await released;
      return rows.map((r) => r.name);
    }),
  );
  await held;
  release();
  const names = await Promise.all(holders);
  const prepared = [...new Set(names.flat())].sort();
  t.ok(prepared.includes('provider_take_slot') && prepared.includes('claim_next_queued'), `the pace's and the forwarder's statements prepared there: ${prepared.join(', ')}`);
  t.same(prepared.filter((name) => !PACED_STATEMENTS.includes(name)), [], 'none the plan tests leave out');
});
