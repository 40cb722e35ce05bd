import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import t from 'tap';
import { openDatabase } from '../../src/db/database.js';
import { migrateToLatest } from '../../src/db/migrator.js';
import { ENGINE, freshDatabase, freshDatabaseUrl, SERVER_URL } from '../helpers/database.js';

const TABLES = ['audit_log', 'callbacks', 'campaigns', 'event_deliveries', 'event_dispatch', 'event_endpoints', 'events', 'idempotency_keys', 'maintenance_passes', 'provider_pacing', 'provider_slots', 'statistics_hourly', 'statistics_unfolded', 'turnaround_hourly', 'underwriting_requests'];

async function tablesOf(db: Awaited<ReturnType<typeof freshDatabase>>['db']): Promise<string[]> {
  const { rows } = await sql<{ table_name: string }>`
    select table_name from information_schema.tables
    where table_schema = 'public' and table_name not like 'kysely_%' order by table_name`.execute(db);
  return rows.map((r) => r.table_name);
}

t.test(`migrations create the schema on ${ENGINE}, and a second run applies nothing`, async (t) => {
  const database = await freshDatabase(t, { migrate: false });
  t.same(await tablesOf(database.db), []);
  const applied = await migrateToLatest(database);
  t.ok(applied.includes('0001_initial'));
  t.same(await tablesOf(database.db), TABLES);
  t.same(await migrateToLatest(database), [], 'nothing pending the second time');
});

t.test(`values come back with the same JS types on ${ENGINE}`, async (t) => {
  const { db } = await freshDatabase(t);
  const row = await db
    .insertInto('underwriting_requests')
    .values({
      customer_uuid: 'c-1',
      cpf_hash: 'h',
      cpf_masked: '***.456.789-**',
      cost_saving_enabled: false,
      srd: JSON.stringify({ grossIncome: 1000.5 }),
      status: 'submitting',
    })
    .returning(['id', 'submitted_at', 'srd', 'cost_saving_enabled', 'upstream_status'])
    .executeTakeFirstOrThrow();
  t.type(row.id, 'number', 'bigint ids are numbers');
  t.ok(row.submitted_at instanceof Date, 'timestamptz is a Date');
  t.same(row.srd, { grossIncome: 1000.5 }, 'jsonb comes back parsed');
  t.equal(row.cost_saving_enabled, false);
  t.equal(row.upstream_status, null);
  const count = await db.selectFrom('underwriting_requests').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
  t.equal(Number(count.n), 1);
});

t.test('the one-in-flight index refuses a second waiting request for a customer', async (t) => {
  const { db } = await freshDatabase(t);
  const values = { customer_uuid: 'c-2', cpf_hash: 'h', cpf_masked: 'm', cost_saving_enabled: false } as const;
  await db.insertInto('underwriting_requests').values({ ...values, status: 'submitted' }).execute();
  await t.rejects(db.insertInto('underwriting_requests').values({ ...values, status: 'submitting' }).execute(), {
    code: '23505',
  });
  await db.insertInto('underwriting_requests').values({ ...values, status: 'submit_failed' }).execute();
  t.pass('a failed request does not count as waiting');
});

t.test('a callback is the result of at most one request; any number wait without one', async (t) => {
  const { db } = await freshDatabase(t);
  const values = (customer_uuid: string) => ({ customer_uuid, cpf_hash: 'h', cpf_masked: 'm', cost_saving_enabled: false, status: 'submitted' as const });
  const [a, b] = await db.insertInto('underwriting_requests').values([values('c-3'), values('c-4')]).returning('id').execute();
  const callback = await db
    .insertInto('callbacks')
    .values({ raw_body: Buffer.from('{}'), outcome: 'matched', request_id: a!.id })
    .returning('id')
    .executeTakeFirstOrThrow();
  await db.updateTable('underwriting_requests').set({ result_callback_id: callback.id }).where('id', '=', a!.id).execute();
  await t.rejects(db.updateTable('underwriting_requests').set({ result_callback_id: callback.id }).where('id', '=', b!.id).execute(), {
    code: '23505',
  });
});

t.test('the foreign keys left after migration 0027: one the callback checks (its event), none on the request', async (t) => {
  const { db } = await freshDatabase(t);
  const { rows } = await sql<{ name: string }>`
    select conrelid::regclass::text || '.' || conname as name from pg_constraint where contype = 'f' order by 1`.execute(db);
  t.same(
    rows.map((r) => r.name),
    [
      'event_deliveries.event_deliveries_event_id_fkey',
      'events.events_callback_id_fkey',
      'idempotency_keys.idempotency_keys_request_id_fkey',
      'underwriting_requests.underwriting_requests_campaign_id_fkey',
    ],
    'requests <-> callbacks and events -> requests are no longer checked by the database: the statements that write them keep them (test/db/no-orphans.test.ts)',
  );
});

t.test('the embedded database keeps its data across restarts under DATA_DIR', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'ugw-pglite-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const first = await openDatabase({ databaseUrl: undefined, dataDir: dir });
  t.equal(first.engine, 'pglite');
  await migrateToLatest(first);
  await first.db
    .insertInto('underwriting_requests')
    .values({ customer_uuid: 'kept', cpf_hash: 'h', cpf_masked: 'm', cost_saving_enabled: true, status: 'submitted' })
    .execute();
  await first.close();

  const second = await openDatabase({ databaseUrl: undefined, dataDir: dir });
  t.same(await migrateToLatest(second), []);
  const row = await second.db.selectFrom('underwriting_requests').select(['customer_uuid', 'id']).executeTakeFirst();
  t.same(row, { customer_uuid: 'kept', id: 1 });
  await second.close();
});

if (SERVER_URL) {
  t.test('two instances migrating one PostgreSQL database at once do not break each other', async (t) => {
    const url = await freshDatabaseUrl(t);
    const a = await openDatabase({ databaseUrl: url, dataDir: 'unused' });
    const b = await openDatabase({ databaseUrl: url, dataDir: 'unused' });
    t.teardown(async () => {
      await a.close();
      await b.close();
    });
    const [ra, rb] = await Promise.all([migrateToLatest(a), migrateToLatest(b)]);
    t.same([...ra, ...rb].filter((n) => n === '0001_initial'), ['0001_initial'], 'applied exactly once');
    t.same(await tablesOf(a.db as never), TABLES);
  });
}
