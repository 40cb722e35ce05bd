import { randomBytes } from 'node:crypto';
import pg from 'pg';
import t from 'tap';
import { openDatabase } from '../../src/db/database.js';
import type { DatabaseHandle } from '../../src/db/handle.js';
import { drewDeadConnection, isStorageUnavailable, markDatabaseError } from '../../src/db/storage-errors.js';
import { sql } from 'kysely';
import { ENGINE, freshDatabase, freshDatabaseUrl, SERVER_URL } from '../helpers/database.js';
import { startRelay, throughRelay } from '../helpers/relay.js';

/** The error the gateway's own database handle gives for what `run` does on it. */
async function errorOf(options: Parameters<typeof openDatabase>[0], run: (db: DatabaseHandle['db']) => Promise<unknown>): Promise<unknown> {
  const database = await openDatabase({ ...options, onIdleError: () => {} });
  try {
    await run(database.db);
  } catch (err) {
    return err;
  } finally {
    await database.close().catch(() => {});
  }
  throw new Error('no error');
}

if (SERVER_URL) {
  t.test('every way the database is out of reach counts as storage unavailable (503)', async (t) => {
    const url = await freshDatabaseUrl(t);
    const role = `ugw_test_${randomBytes(4).toString('hex')}`;
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    await admin.query(`create role ${role} login connection limit 0`);
    t.teardown(async () => {
      await admin.query(`drop role if exists ${role}`);
      await admin.end();
    });
    const asRole = new URL(url);
    asRole.username = role;

    const relay = await startRelay(new URL(url).hostname, Number(new URL(url).port || 5432));
    t.teardown(() => relay.close());
    const at = (databaseUrl: string) => ({ databaseUrl, dataDir: 'unused' });

    const unavailable: Record<string, unknown> = {
      'too many clients': await errorOf(at(asRole.toString()), (db) => sql`select 1`.execute(db)),
      'admin shutdown': await errorOf(at(url), (db) => sql`select pg_terminate_backend(pg_backend_pid())`.execute(db)),
      'statement timeout': await errorOf(at(url), (db) =>
        db.transaction().execute(async (trx) => {
          await sql`set local statement_timeout = 10`.execute(trx);
          await sql`select pg_sleep(1)`.execute(trx);
        }),
      ),
      // Transaction mode: no server-side statement_timeout, so the client's own timeout fires.
      'query read timeout': await errorOf({ ...at(url), poolMode: 'transaction', queryTimeoutMs: 50 }, (db) => sql`select pg_sleep(1)`.execute(db)),
      'read-only database (a standby after a failover)': await errorOf(at(url), (db) =>
        db.transaction().execute(async (trx) => {
          await sql`set transaction read only`.execute(trx);
          await sql`create table t (x int)`.execute(trx);
        }),
      ),
      // A database closed for maintenance (ALTER DATABASE ... ALLOW_CONNECTIONS false): 55000 at connect.
      'a database not accepting connections': await (async () => {
        const name = decodeURIComponent(new URL(url).pathname.slice(1));
        // Not from a connection to that database (PostgreSQL refuses it there).
        const server = new URL(url);
        server.pathname = '/postgres';
        const other = new pg.Client({ connectionString: server.toString() });
        await other.connect();
        await other.query(`alter database "${name}" allow_connections false`);
        try {
          return await errorOf(at(url), (db) => sql`select 1`.execute(db));
        } finally {
          await other.query(`alter database "${name}" allow_connections true`);
          await other.end();
        }
      })(),
      'connection lost mid-query': await errorOf(at(throughRelay(url, relay)), async (db) => {
        await sql`select 1`.execute(db);
        const query = sql`select pg_sleep(1)`.execute(db);
        relay.cut();
        await query;
      }),
    };
    relay.restore();
    for (const [what, err] of Object.entries(unavailable)) t.ok(isStorageUnavailable(err), what);
  });
}

if (SERVER_URL) {
  t.test('a statement on a connection that had died says so; a connect the database refuses does not', async (t) => {
    const url = await freshDatabaseUrl(t);
    const relay = await startRelay(new URL(url).hostname, Number(new URL(url).port || 5432));
    t.teardown(() => relay.close());
    const at = { databaseUrl: throughRelay(url, relay), dataDir: 'unused' };
    const died = await errorOf(at, async (db) => {
      await sql`select 1`.execute(db); // an idle connection in the pool
      relay.cutBusyLeavingIdleToDie();
      await sql`select 1`.execute(db);
    });
    t.ok(drewDeadConnection(died), `a connection that died while idle: ${(died as Error).message}`);
    // Nothing listens there any more: the connect is refused (ECONNREFUSED).
    const closed = await startRelay(new URL(url).hostname, Number(new URL(url).port || 5432));
    await closed.close();
    const refused = await errorOf({ databaseUrl: throughRelay(url, closed), dataDir: 'unused' }, (db) => sql`select 1`.execute(db));
    t.ok(isStorageUnavailable(refused), 'a refused connect is an outage');
    t.notOk(drewDeadConnection(refused), `but not a dead connection: trying again at once does no good (${(refused as Error).message})`);
    t.notOk(drewDeadConnection(Object.assign(new Error('Connection terminated'), { code: 'ECONNRESET' })), 'never an error from another layer');
    // What pg-pool says of a connect that timed out (a database gone silent): each try would wait it out.
    const timedOut = new Error('Connection terminated due to connection timeout');
    markDatabaseError(timedOut);
    t.ok(isStorageUnavailable(timedOut), 'a timed-out connect is an outage');
    t.notOk(drewDeadConnection(timedOut), 'but not a dead connection');
  });
}

t.test("a client's own failures are never the database's, whatever their code", async (t) => {
  // What Node gives a route whose client closed or reset its connection mid-body (issue 32).
  const aborted = Object.assign(new Error('aborted'), { code: 'ECONNRESET' });
  t.notOk(isStorageUnavailable(aborted), 'aborted / ECONNRESET from a request body');
  t.notOk(isStorageUnavailable(Object.assign(new Error('write EPIPE'), { code: 'EPIPE' })), 'EPIPE writing an answer');
  t.notOk(isStorageUnavailable(Object.assign(new Error('x'), { code: '08006' })), 'a SQLSTATE-looking code from elsewhere');
  t.notOk(isStorageUnavailable(new Error('Connection terminated')), "a connection message from another layer");
  const fromPool = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
  markDatabaseError(fromPool);
  t.ok(isStorageUnavailable(fromPool), 'the same code from a database connection is');
  t.ok(isStorageUnavailable(new Error('wrapped', { cause: fromPool })), 'also as the cause of another error');
});

t.test(`on ${ENGINE}: a statement the database refuses is not an outage; a database closed under the instance is`, async (t) => {
  const database = await freshDatabase(t, { migrate: false });
  const refused = await sql`select * from no_such_table`.execute(database.db).then(
    () => undefined,
    (err: unknown) => err,
  );
  t.ok(refused instanceof Error, 'the statement fails');
  t.notOk(isStorageUnavailable(refused), 'a refused statement is a bug (500), not 503');
  // 55000 at connect (a database closed for maintenance) is an outage; the same code of a statement is a bug.
  await sql`create sequence if not exists s_unused`.execute(database.db);
  const currval = await sql`select currval('s_unused')`.execute(database.db).then(
    () => undefined,
    (err: unknown) => err,
  );
  t.ok(currval instanceof Error, 'the statement fails');
  t.equal((currval as { code?: string }).code, '55000', "currval before nextval: object not in prerequisite state");
  t.notOk(isStorageUnavailable(currval), 'a statement refused with 55000 is a bug (500), not 503');
  await database.close();
  const closed = await sql`select 1`.execute(database.db).then(
    () => undefined,
    (err: unknown) => err,
  );
  t.ok(closed instanceof Error, 'a statement on the closed database fails');
  t.ok(isStorageUnavailable(closed), 'and counts as storage unavailable (503)');
});
