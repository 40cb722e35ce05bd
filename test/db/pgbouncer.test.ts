import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { sql } from 'kysely';
import t from 'tap';
import { loadConfig } from '../../src/config/config.js';
import { buildTestApp, TEST_CPF_HASH_KEY, TEST_PARTNER_TOKEN } from '../helpers/app.js';
import { configProblems } from '../helpers/config.js';
import { freshDatabase, freshDatabaseUrl, SERVER_URL } from '../helpers/database.js';
import { httpRequest } from '../helpers/http.js';
import { startPgBouncer } from '../helpers/pgbouncer.js';
import { startProcess } from '../helpers/process.js';
import { until } from '../helpers/until.js';
import { CPF, validRequest } from '../submissions/fixtures.js';
import { startFakeProvider } from '../submissions/provider.js';

t.test('DATABASE_POOL_MODE and DATABASE_LISTEN_URL', async (t) => {
  const base = { DATABASE_URL: 'postgres://u@pooler:6432/db' };
  const config = loadConfig(base);
  t.equal(config.databasePoolMode, 'session', 'session by default');
  t.equal(config.databaseListenUrl, base.DATABASE_URL, 'LISTEN goes to DATABASE_URL by default');
  const tx = loadConfig({ ...base, DATABASE_POOL_MODE: 'transaction', DATABASE_LISTEN_URL: 'postgres://u@db:5432/db' });
  t.equal(tx.databasePoolMode, 'transaction');
  t.equal(tx.databaseListenUrl, 'postgres://u@db:5432/db');
  t.same(configProblems(loadConfig, { ...base, DATABASE_POOL_MODE: 'statement' }), [
    "DATABASE_POOL_MODE: Invalid option: expected one of \"session\"|\"transaction\"",
  ]);
  t.match(configProblems(loadConfig, { ...base, DATABASE_LISTEN_URL: 'mysql://x' }), [/^DATABASE_LISTEN_URL: must be a postgres/]);
  t.match(configProblems(loadConfig, { DATABASE_LISTEN_URL: 'postgres://u@db/db' }), [/^DATABASE_LISTEN_URL: needs DATABASE_URL/]);
  t.match(configProblems(loadConfig, { DATABASE_POOL_MODE: 'transaction' }), [/^DATABASE_POOL_MODE: transaction needs DATABASE_URL/]);
});

const server = SERVER_URL;
if (server) {
  t.test("/readyz answers 503 while a statement of the gateway's kind fails, though a bare select answers", async (t) => {
    const database = await freshDatabase(t);
    const { app } = await buildTestApp(t, { database });
    t.equal((await app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200, 'ready');
    // The gateway's own statements cannot run (its table is locked away), select 1 still answers.
    const locker = new pg.Client({ connectionString: database.url });
    await locker.connect();
    t.teardown(() => locker.end());
    await locker.query('begin');
    await locker.query('lock table underwriting_requests in access exclusive mode');
    await sql`select 1`.execute(database.db);
    const res = await app.inject({ method: 'GET', url: '/readyz' });
    t.equal(res.statusCode, 503, 'not ready');
    t.equal(res.json().error, 'storage_unavailable');
    await locker.query('commit');
    t.equal((await app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200, 'ready again at the next call, with no other query');
  });

  for (const mode of ['session', 'transaction'] as const) {
    t.test(`behind PgBouncer in ${mode} mode the gateway starts, migrates and answers under concurrency`, { timeout: 90_000 }, async (t) => {
      const direct = await freshDatabaseUrl(t);
      const bouncer = await startPgBouncer(t, server, mode);
      const provider = await startFakeProvider(t);
      const gateway = startProcess(t, {
        DATABASE_URL: bouncer.url(direct),
        DATABASE_POOL_MODE: mode,
        // Behind a transaction pooler LISTEN needs a connection of its own: the direct one.
        ...(mode === 'transaction' ? { DATABASE_LISTEN_URL: direct } : {}),
        HOST: '127.0.0.1',
        PORT: '0',
        PROVIDER_BASE_URL: provider.url,
        PARTNER_TOKEN: TEST_PARTNER_TOKEN,
        CPF_HASH_KEY: TEST_CPF_HASH_KEY,
      });
      const base = await gateway.listening();
      t.equal((await httpRequest(`${base}/readyz`)).status, 200, 'ready');

      const customers = Array.from({ length: 50 }, (_, i) => `pgb-${mode}-${i}`);
      const submitted = await Promise.all(
        customers.map((customerUuid) => httpRequest(`${base}/v1/underwritings`, { body: validRequest({ customerUuid }) })),
      );
      t.same(submitted.map((r) => r.status), customers.map(() => 202), '50 concurrent submits answered 202');

      // A long-poll waits on the first customer, through DATABASE_LISTEN_URL's connection.
      const waited = customers[0]!;
      const pollSent = performance.now();
      const longPoll = httpRequest(`${base}/v1/underwritings/${waited}?wait=20`);
      await until(
        async () => /underwriting_longpoll_waiters 1\b/.test((await httpRequest(`${base}/metrics`)).text),
        10_000,
        'the long-poll to wait',
      );

      const now = Date.now();
      const result = (customerUuid: string) => ({
        customerUuid,
        started: new Date(now).toISOString(),
        finished: new Date(now + 1000).toISOString(),
        serviceType: 'CREDIT_SCORE',
        response: { costSavingEnabled: false, score: 712.5, riskBand: 3, limit: 4500 },
      });
      const callbacks = await Promise.all(
        customers.map((c) => httpRequest(`${base}/v1/callbacks/underwriting`, { body: result(c) })),
      );
      const storedAt = performance.now();
      t.same(callbacks.map((r) => r.status), customers.map(() => 200), '50 concurrent callbacks answered 200');

      const polled = await longPoll;
      const lag = performance.now() - storedAt;
      t.equal(polled.status, 200);
      t.match(polled.json, { customerUuid: waited, status: 'completed', decision: 'approved' });
      // Loose bounds (a loaded host took over 2 s for the callbacks' commit to reach the poll): an answer at
      // the deadline comes 20 s after the poll was sent, however long the callbacks took.
      const polledAfter = performance.now() - pollSent;
      t.ok(lag < 10_000 && polledAfter < 19_000, `the long-poll answered ${Math.round(lag)} ms after the callbacks (${Math.round(polledAfter)} ms after it was sent), not at its 20 s deadline`);

      const reads = await Promise.all(customers.map((c) => httpRequest(`${base}/v1/underwritings/${c}`)));
      t.same(reads.map((r) => r.status), customers.map(() => 200), '50 concurrent GETs answered 200');
      t.ok(reads.every((r, i) => r.json.customerUuid === customers[i] && r.json.status === 'completed'), 'each one completed');

      const lists = await Promise.all(Array.from({ length: 10 }, () => httpRequest(`${base}/v1/underwritings?limit=100`)));
      t.same(lists.map((r) => r.status), lists.map(() => 200), 'lists answered 200');
      t.equal(lists[0]!.json.items.length, 50);

      const lookups = await Promise.all(
        Array.from({ length: 10 }, () => httpRequest(`${base}/v1/underwritings/lookup`, { body: { cpf: CPF } })),
      );
      t.same(lookups.map((r) => r.status), lookups.map(() => 200), 'lookups answered 200');
      t.equal((await httpRequest(`${base}/readyz`)).status, 200, 'still ready');

      const logged = gateway.stdout.join('\n');
      t.notMatch(logged, /prepared statement|unsupported startup parameter/, 'no prepared-statement or startup-parameter errors');
      if (mode === 'transaction') {
        t.match(logged, /"level":"warn".*the server's statement_timeout is off: a statement the gateway gave up on after 15000 ms/, 'a server without its own statement timeout is warned about');
      } else {
        t.notMatch(logged, /statement_timeout is/, 'in session mode the gateway sets it');
      }
      t.notMatch(bouncer.log(), /unsupported startup parameter/);
      gateway.child.kill('SIGTERM');
      t.equal((await gateway.exited).code, 0, 'stops cleanly');
    });
  }

  t.test("behind a transaction pooler a database with its own statement_timeout is not warned about", { timeout: 60_000 }, async (t) => {
    const direct = await freshDatabaseUrl(t);
    const admin = new pg.Client({ connectionString: SERVER_URL });
    await admin.connect();
    await admin.query(`alter database ${new URL(direct).pathname.slice(1)} set statement_timeout = '15s'`);
    await admin.end();
    const bouncer = await startPgBouncer(t, server, 'transaction');
    const gateway = startProcess(t, {
      DATABASE_URL: bouncer.url(direct),
      DATABASE_POOL_MODE: 'transaction',
      DATABASE_LISTEN_URL: direct,
      HOST: '127.0.0.1',
      PORT: '0',
      PROVIDER_BASE_URL: 'http://127.0.0.1:9',
      PARTNER_TOKEN: TEST_PARTNER_TOKEN,
      CPF_HASH_KEY: TEST_CPF_HASH_KEY,
    });
    await gateway.listening();
    const logged = gateway.stdout.join('\n');
    t.match(logged, /database opened/, 'started');
    t.notMatch(logged, /statement_timeout is/, 'no warning: the server bounds what the client gives up on');
    gateway.child.kill('SIGTERM');
    t.equal((await gateway.exited).code, 0);
  });
}
