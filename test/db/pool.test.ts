import { setTimeout as delay } from 'node:timers/promises';
import { sql } from 'kysely';
import pg from 'pg';
import t, { type Test } from 'tap';
import { openDatabase } from '../../src/db/database.js';
import { KEEP_OPEN } from '../../src/db/guarded-pool.js';
import { freshDatabaseUrl, SERVER_URL } from '../helpers/database.js';
import { until } from '../helpers/until.js';

// After a quiet spell the next burst of callbacks finds KEEP_OPEN connections still open, instead
// of opening them again (connection set-up, every prepared statement planned anew).

/** The idle timeout of these pools: short, so that a quiet spell takes a fraction of a second. */
const IDLE_MS = 100;

/** PGlite is one engine inside the process: no pool, no connection to open, keep or set up. */
async function onPglite(t: Test): Promise<boolean> {
  if (SERVER_URL) return false;
  const database = await openDatabase({ databaseUrl: undefined, dataDir: 'memory://', idleTimeoutMs: IDLE_MS });
  t.teardown(() => database.close());
  t.equal(database.engine, 'pglite');
  return true;
}

t.test('a quiet spell closes idle connections only down to KEEP_OPEN', async (t) => {
  if (await onPglite(t)) return;
  const url = await freshDatabaseUrl(t);
  const database = await openDatabase({ databaseUrl: url, dataDir: 'unused', poolSize: 10, idleTimeoutMs: IDLE_MS });
  t.teardown(() => database.close());
  // Counted from outside the pool, so that counting uses none of its connections.
  const observer = new pg.Client({ connectionString: url });
  await observer.connect();
  t.teardown(() => observer.end());
  const open = async () =>
    (
      await observer.query<{ n: number }>(
        "select count(*)::int as n from pg_stat_activity where datname = current_database() and application_name = 'underwriting-gateway'",
      )
    ).rows[0]!.n;

  // A burst of statements that all wait on a lock the observer holds: while they wait, each holds a
  // connection of its own (with a timed statement instead, the first to end could serve a later
  // one before its own connection was up, and that connection, idle, closed before the count).
  const burst = 8;
  const LOCK = 7_331_001;
  await observer.query('select pg_advisory_lock($1)', [LOCK]);
  const burstDone = Promise.all(Array.from({ length: burst }, () => sql`select pg_advisory_xact_lock_shared(${LOCK}::bigint)`.execute(database.db)));
  const waiting = async () =>
    (await observer.query<{ n: number }>(`select count(*)::int as n from pg_locks where locktype = 'advisory' and not granted and objid = $1`, [LOCK])).rows[0]!.n;
  await until(async () => ((await waiting()) === burst ? true : undefined), 20_000, 'every statement of the burst waiting on the lock');
  t.equal(await open(), burst, 'the burst opened a connection for each statement at once');
  await observer.query('select pg_advisory_unlock($1)', [LOCK]);
  await burstDone;

  // The pool closes idle connections in another process's view: poll until it has done so.
  await until(async () => ((await open()) <= KEEP_OPEN ? true : undefined), 10_000);
  // Then a quiet spell of several idle timeouts, in which nothing more may be closed.
  await delay(5 * IDLE_MS);
  t.equal(await open(), KEEP_OPEN, `${KEEP_OPEN} connections stay open through the quiet spell`);

  const before = await open();
  await Promise.all(Array.from({ length: KEEP_OPEN }, () => sql`select 1`.execute(database.db)));
  t.equal(await open(), before, 'the next burst of that size opens no connection');
});

t.test('every connection of a session-mode pool runs without JIT; a transaction-mode pool sets nothing', async (t) => {
  if (await onPglite(t)) return;
  const url = await freshDatabaseUrl(t);
  // Whatever this server's own default, this database's is on.
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`alter database "${new URL(url).pathname.slice(1)}" set jit = on`);
  await admin.end();

  const settingsOf = async (db: Awaited<ReturnType<typeof openDatabase>>['db']) =>
    Promise.all(
      Array.from({ length: 6 }, async () => {
        const { rows } = await sql<{ jit: string; pid: number }>`select current_setting('jit') as jit, pg_backend_pid() as pid, pg_sleep(0.05)`.execute(db);
        return rows[0]!;
      }),
    );
  const session = await openDatabase({ databaseUrl: url, dataDir: 'unused', poolSize: 10 });
  t.teardown(() => session.close());
  const seen = await settingsOf(session.db);
  t.ok(new Set(seen.map((s) => s.pid)).size > 1, 'several connections were asked');
  t.same([...new Set(seen.map((s) => s.jit))], ['off'], 'every one of them runs without JIT');

  const transaction = await openDatabase({ databaseUrl: url, dataDir: 'unused', poolMode: 'transaction' });
  t.teardown(() => transaction.close());
  t.same([...new Set((await settingsOf(transaction.db)).map((s) => s.jit))], ['on'], "behind a transaction pooler the server's setting stands");
});
