import { randomBytes } from 'node:crypto';
import pg from 'pg';
import t from 'tap';
import { isStorageUnavailable } from '../../src/db/database.js';
import { sql } from 'kysely';
import { ENGINE, freshDatabase, freshDatabaseUrl, SERVER_URL } from '../helpers/database.js';
import { startRelay, throughRelay } from '../helpers/relay.js';

/** The error a real PostgreSQL gives for what `run` does on a fresh connection to `url`. */
async function errorOf(url: string, run: (client: pg.Client) => Promise<unknown>): Promise<unknown> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => {});
  try {
    await client.connect();
    await run(client);
  } catch (err) {
    return err;
  } finally {
    await client.end().catch(() => {});
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

    const unavailable: Record<string, unknown> = {
      'too many clients': await errorOf(asRole.toString(), async () => {}),
      'admin shutdown': await errorOf(url, (c) => c.query('select pg_terminate_backend(pg_backend_pid())')),
      'statement timeout': await errorOf(url, (c) => c.query('set statement_timeout = 10').then(() => c.query('select pg_sleep(1)'))),
      'query read timeout': await errorOf(url, (c) => c.query({ text: 'select pg_sleep(1)', query_timeout: 10 } as pg.QueryConfig)),
      'read-only database (a standby after a failover)': await errorOf(url, async (c) => {
        await c.query('set default_transaction_read_only = on');
        await c.query('create table t (x int)');
      }),
      'connection lost mid-query': await errorOf(throughRelay(url, relay), async (c) => {
        const query = c.query('select pg_sleep(1)');
        relay.cut();
        await query;
      }),
    };
    relay.restore();
    for (const [what, err] of Object.entries(unavailable)) t.ok(isStorageUnavailable(err), what);
  });
}

t.test(`on ${ENGINE}: a statement the database refuses is not an outage; a database closed under the instance is`, async (t) => {
  const database = await freshDatabase(t, { migrate: false });
  const refused = await sql`select * from no_such_table`.execute(database.db).then(
    () => undefined,
    (err: unknown) => err,
  );
  t.ok(refused instanceof Error, 'the statement fails');
  t.notOk(isStorageUnavailable(refused), 'a refused statement is a bug (500), not 503');
  await database.close();
  const closed = await sql`select 1`.execute(database.db).then(
    () => undefined,
    (err: unknown) => err,
  );
  t.ok(closed instanceof Error, 'a statement on the closed database fails');
  t.ok(isStorageUnavailable(closed), 'and counts as storage unavailable (503)');
});
