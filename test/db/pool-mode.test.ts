import pg from 'pg';
import t, { type Test } from 'tap';
import { sql } from 'kysely';
import { openDatabase } from '../../src/db/database.js';
import { runStatement } from '../../src/db/run-statement.js';
import { defineStatement } from '../../src/db/statements.js';
import { migrateToLatest } from '../../src/db/migrator.js';
import { buildTestApp, TEST_CPF_HASH_KEY, TEST_PARTNER_TOKEN } from '../helpers/app.js';
import { freshDatabase, freshDatabaseUrl, SERVER_URL } from '../helpers/database.js';
import { startPgBouncer } from '../helpers/pgbouncer.js';
import { startProcess } from '../helpers/process.js';
import { validRequest } from '../submissions/fixtures.js';
import { startFakeProvider } from '../submissions/provider.js';

// DATABASE_POOL_MODE=session (the default) behind a transaction-pooling PgBouncer: named prepared
// statements land on server connections that do not have them. The gateway refuses to start, and
// whatever slips past the check at start answers 503 (never 500) and counts against readiness.

const server = SERVER_URL;
if (!server) {
  t.comment('PgBouncer needs a PostgreSQL server: set DATABASE_URL');
} else {
  t.test('the check at start: passes directly and behind a session pooler, fails behind a transaction pooler', async (t) => {
    const direct = await freshDatabaseUrl(t);
    const session = await startPgBouncer(t, server, 'session');
    const transaction = await startPgBouncer(t, server, 'transaction');
    const open = async (url: string) => {
      const database = await openDatabase({ databaseUrl: url, dataDir: 'memory://' });
      t.teardown(() => database.close());
      return database;
    };
    const viaDirect = await open(direct);
    const viaSession = await open(session.url(direct));
    const viaTransaction = await open(transaction.url(direct));
    // Several times: the check must not depend on luck.
    for (let i = 0; i < 5; i++) {
      await t.resolves(viaDirect.verifyPoolMode(), `direct, round ${i}`);
      await t.resolves(viaSession.verifyPoolMode(), `session pooler, round ${i}`);
      await t.rejects(viaTransaction.verifyPoolMode(), { message: /DATABASE_POOL_MODE=transaction/ }, `transaction pooler, round ${i}`);
    }
    // Told the truth, it does not check.
    const told = await openDatabase({ databaseUrl: transaction.url(direct), poolMode: 'transaction', dataDir: 'memory://' });
    t.teardown(() => told.close());
    await t.resolves(told.verifyPoolMode());
  });

  t.test('behind a transaction pooler the check fails every time, also while other clients keep its server connections busy', { timeout: 120_000 }, async (t) => {
    const direct = await freshDatabaseUrl(t);
    const transaction = await startPgBouncer(t, server, 'transaction');
    const checked = await openDatabase({ databaseUrl: transaction.url(direct), dataDir: 'memory://' });
    t.teardown(() => checked.close());
    // Other traffic through the same pooler (a gateway's other routes and workers): short
    // transactions that take and release server connections while the check runs, so that the
    // connection a transaction pooler hands out next is not always the one the check just used.
    const others = await openDatabase({ databaseUrl: transaction.url(direct), dataDir: 'memory://', poolSize: 4 });
    t.teardown(() => others.close());
    let busy = true;
    const traffic = Array.from({ length: 4 }, async () => {
      while (busy) await sql`select pg_sleep(0.001)`.execute(others.db);
    });
    let passed = 0;
    try {
      for (let i = 0; i < 30; i++) {
        if (await checked.verifyPoolMode().then(() => true, () => false)) passed++;
      }
    } finally {
      busy = false;
      await Promise.all(traffic);
    }
    t.equal(passed, 0, 'no check of 30 passed');
  });

  t.test('the check is not fooled by a pooler that hands out server connections round robin (server_round_robin = 1)', { timeout: 60_000 }, async (t) => {
    const direct = await freshDatabaseUrl(t);
    const transaction = await startPgBouncer(t, server, 'transaction', { roundRobin: true });
    const session = await startPgBouncer(t, server, 'session', { roundRobin: true });
    // Exactly two idle server connections (two transactions at once, then ended): handed out least
    // recently released first, two connections taking turns would each get their own back every time.
    const warm = async () => {
      const clients = [new pg.Client({ connectionString: transaction.url(direct) }), new pg.Client({ connectionString: transaction.url(direct) })];
      try {
        for (const client of clients) await client.connect();
        for (const client of clients) await client.query('begin');
        const pids = await Promise.all(clients.map(async (client) => (await client.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid));
        t.not(pids[0], pids[1], 'two server connections');
        for (const client of clients) await client.query('commit');
      } finally {
        for (const client of clients) await client.end();
      }
    };
    await warm();
    // The premise: two connections taking turns, each in transactions of its own, each get their own backend back.
    const turns = [new pg.Client({ connectionString: transaction.url(direct) }), new pg.Client({ connectionString: transaction.url(direct) })];
    const seen: Array<Set<number>> = [new Set(), new Set()];
    try {
      for (const client of turns) await client.connect();
      for (let turn = 0; turn < 8; turn++) seen[turn % 2]!.add((await turns[turn % 2]!.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid);
    } finally {
      for (const client of turns) await client.end();
    }
    t.same(seen.map((pids) => pids.size), [1, 1], 'taking turns, each connection met one backend only');
    t.not([...seen[0]!][0], [...seen[1]!][0], 'and not the same one');
    const viaTransaction = await openDatabase({ databaseUrl: transaction.url(direct), dataDir: 'memory://' });
    t.teardown(() => viaTransaction.close());
    const viaSession = await openDatabase({ databaseUrl: session.url(direct), dataDir: 'memory://' });
    t.teardown(() => viaSession.close());
    for (let i = 0; i < 10; i++) {
      await t.rejects(viaTransaction.verifyPoolMode(), { message: /DATABASE_POOL_MODE=transaction/ }, `transaction pooler, round robin, round ${i}`);
      await t.resolves(viaSession.verifyPoolMode(), `session pooler, round robin, round ${i}`);
    }
  });

  /** A gateway started with `url` (through a pooler) that must refuse to start: what it said on stderr, after checking it exited 1 without echoing the URL. */
  const refusedStart = async (t: Test, url: string): Promise<string> => {
    const gateway = startProcess(t, {
      DATABASE_URL: url,
      HOST: '127.0.0.1',
      PORT: '0',
      PROVIDER_BASE_URL: 'http://127.0.0.1:9',
      PARTNER_TOKEN: TEST_PARTNER_TOKEN,
      CPF_HASH_KEY: TEST_CPF_HASH_KEY,
    });
    const { code } = await gateway.exited;
    t.equal(code, 1, 'exit code 1');
    const said = gateway.stderr.join('\n');
    t.notMatch(said, new RegExp(url.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')), 'the connection string is not echoed');
    return said;
  };

  t.test('a gateway with DATABASE_POOL_MODE=session behind a transaction pooler refuses to start, naming the variable', { timeout: 60_000 }, async (t) => {
    const direct = await freshDatabaseUrl(t);
    const bouncer = await startPgBouncer(t, server, 'transaction');
    const said = await refusedStart(t, bouncer.url(direct));
    t.match(said, /failed to start: named prepared statements do not survive between transactions/);
    t.match(said, /set DATABASE_POOL_MODE=transaction/);
  });

  t.test('behind a session pooler with no room for a second server connection, the start says why the check did not finish', { timeout: 60_000 }, async (t) => {
    const direct = await freshDatabaseUrl(t);
    // One server connection for the database and user: the start's ping takes it (and keeps it, in
    // session mode), so the check's second connection waits for one until the query timeout.
    const bouncer = await startPgBouncer(t, server, 'session', { poolSize: 1 });
    const said = await refusedStart(t, bouncer.url(direct));
    t.match(said, /failed to start: the DATABASE_POOL_MODE=session check did not finish \(Query read timeout\): it holds a transaction on two connections at once/);
    t.match(said, /default_pool_size, max_db_connections/);
    t.notMatch(said, /named prepared statements do not survive/, 'not taken for a transaction pooler');
  });

  t.test('at run time the same mistake answers 503, never 500, counts against readiness, and is said once', { timeout: 90_000 }, async (t) => {
    const direct = await freshDatabaseUrl(t);
    const bouncer = await startPgBouncer(t, server, 'transaction');
    const migrated = await openDatabase({ databaseUrl: direct, dataDir: 'memory://' });
    await migrateToLatest(migrated);
    await migrated.close();
    const mismatches: Error[] = [];
    // As a gateway whose start-up check passed (another client took the server connection it used).
    const database = await openDatabase({
      databaseUrl: bouncer.url(direct),
      listenUrl: direct,
      dataDir: 'memory://',
      poolSize: 10,
      onPoolModeMismatch: (err) => mismatches.push(err),
    });
    t.teardown(() => database.close());
    const provider = await startFakeProvider(t);
    const { app } = await buildTestApp(t, { database, env: { PROVIDER_BASE_URL: provider.url } });

    const statuses = new Map<number, number>();
    let readyWhileFailing: number | undefined;
    const deadline = Date.now() + 30_000;
    for (let round = 0; (statuses.get(503) ?? 0) === 0 && Date.now() < deadline; round++) {
      const answers = await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          app.inject({ method: 'POST', url: '/v1/underwritings', payload: validRequest({ customerUuid: `pm-${round}-${i}` }) }),
        ),
      );
      for (const a of answers) statuses.set(a.statusCode, (statuses.get(a.statusCode) ?? 0) + 1);
      if (answers.some((a) => a.statusCode === 503)) readyWhileFailing = (await app.inject({ url: '/readyz' })).statusCode;
    }
    t.comment(`answers: ${JSON.stringify(Object.fromEntries(statuses))}`);
    t.ok((statuses.get(503) ?? 0) > 0, 'some submits met a server connection without their statement: 503');
    t.notOk(statuses.has(500), 'none answered 500');
    t.same([...statuses.keys()].filter((s) => s !== 202 && s !== 503), [], 'every answer is 202 or 503');
    t.equal(readyWhileFailing, 503, '/readyz answers 503 right after');
    t.equal(mismatches.length, 1, 'said once');
    t.match(mismatches[0]?.message, /DATABASE_POOL_MODE=transaction/);
    t.match((mismatches[0]?.cause as { code?: string } | undefined)?.code, /^(26000|42P05)$/);
  });

  t.test('after a mismatch seen at run time, readiness comes back once named statements survive again (no restart)', async (t) => {
    const mismatches: Error[] = [];
    const database = await openDatabase({ databaseUrl: await freshDatabaseUrl(t), dataDir: 'memory://', poolSize: 2, onPoolModeMismatch: (err) => mismatches.push(err) });
    t.teardown(() => database.close());
    await migrateToLatest(database);
    const statement = defineStatement('ugw_test_mismatch', 'select 1 as one');
    await runStatement(database.db, statement, []);
    // What a transaction pooler does to a session: the statement pg believes prepared is gone.
    await sql`deallocate all`.execute(database.db);
    await t.rejects(runStatement(database.db, statement, []), { code: '26000' });
    t.equal(mismatches.length, 1, 'the mismatch is seen');
    // The database itself is direct: each probe checks anew, so the instance is ready again.
    await t.resolves(database.probe(2000), 'ready again without a restart');
  });
}

// A direct connection never trips the check (the suite's default database, PGlite included).
t.test('a direct database passes the check', async (t) => {
  const database = await freshDatabase(t);
  await t.resolves(database.verifyPoolMode());
});
