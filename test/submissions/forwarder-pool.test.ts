import type http from 'node:http';
import pg from 'pg';
import t from 'tap';
import { guardedPoolOf } from '../../src/db/guarded-pool.js';
import { PACING_POOL_SIZE } from '../../src/db/handle.js';
import { FORWARD_WRITES } from '../../src/submissions/forwarder.js';
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
  // More forwards in flight than the pool (20 connections in tests) has connections.
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
