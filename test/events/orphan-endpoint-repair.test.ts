import { promises as fs } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { FileMigrationProvider, type Kysely, Migrator, sql } from 'kysely';
import t from 'tap';
import { migrateToLatest } from '../../src/db/migrator.js';
import { freshDatabase } from '../helpers/database.js';

// Migration 0025: a deleted API endpoint whose dispatch position an older worker wrote back (its
// read of the endpoints predated the DELETE) had pending deliveries that nothing ever ended. They
// end as the DELETE ends a backlog, the position goes; live endpoints and configured URLs stay.

const MIGRATIONS = fileURLToPath(new URL('../../migrations', import.meta.url));

t.test('migration 0025 ends the pending deliveries and the position of a deleted API endpoint, and nothing else', async (t) => {
  const database = await freshDatabase(t, { migrate: false });
  const db = database.db as unknown as Kysely<unknown>;
  const migrator = new Migrator({ db, provider: new FileMigrationProvider({ fs, path, migrationFolder: MIGRATIONS }) });
  const { error } = await migrator.migrateTo('0024_maintenance_passes');
  if (error) throw error;

  const live = 'ep_' + 'a'.repeat(32);
  const deleted = 'ep_' + 'b'.repeat(32);
  const configured = 'ck_' + 'c'.repeat(32);
  await sql`insert into event_endpoints (id, key, managed, url, shown_url, status, created_at, updated_at)
            values (${live}, ${live}, 'api', 'http://127.0.0.1:9/live', 'http://127.0.0.1:9/live', 'active', now(), now())`.execute(db);
  await sql`insert into event_dispatch (url_key, url, tx_id, event_id, updated_at)
            values (${live}, 'http://127.0.0.1:9/live', pg_current_xact_id(), 0, now()),
                   (${deleted}, 'http://127.0.0.1:9/deleted', pg_current_xact_id(), 0, now()),
                   (${configured}, 'http://127.0.0.1:9/configured', pg_current_xact_id(), 0, now())`.execute(db);
  await sql`insert into events (public_id, type, customer_uuid, created_at, data)
            values ('evt_1', 'callback.unmatched', 'cust-1', now(), '{}'::jsonb), ('evt_2', 'callback.unmatched', 'cust-2', now(), '{}'::jsonb)`.execute(db);
  const delivery = (event: string, key: string, status: string, leaseS: number | null = null) => sql`
    insert into event_deliveries (event_id, customer_uuid, url_key, url, status, queued_at, next_attempt_at, lease_until, lease_token)
    select id, customer_uuid, ${key}, 'http://127.0.0.1:9/x', ${status}, now(), now(),
           case when ${leaseS}::int is null then null else now() + make_interval(secs => ${leaseS}::int) end,
           case when ${leaseS}::int is null then null else 'token' end
      from events where public_id = ${event}`.execute(db);
  await delivery('evt_1', live, 'pending');
  await delivery('evt_1', deleted, 'pending');
  await delivery('evt_2', deleted, 'pending', 60); // an attempt in flight now
  await delivery('evt_1', configured, 'pending');
  await delivery('evt_2', live, 'delivered');

  const applied = await migrateToLatest(database);
  t.ok(applied.includes('0025_orphan_endpoint_deliveries'), 'applied 0025');

  const { rows: positions } = await sql<{ url_key: string }>`select url_key from event_dispatch order by url_key`.execute(db);
  t.same(positions.map((p) => p.url_key), [configured, live], "the deleted endpoint's position is gone");
  const { rows } = await sql<{ url_key: string; public_id: string; status: string; last_error: string | null; leased: boolean }>`
    select d.url_key, e.public_id, d.status, d.last_error, d.lease_token is not null as leased
      from event_deliveries d join events e on e.id = d.event_id order by d.url_key, e.public_id`.execute(db);
  t.same(rows, [
    { url_key: configured, public_id: 'evt_1', status: 'pending', last_error: null, leased: false },
    { url_key: live, public_id: 'evt_1', status: 'pending', last_error: null, leased: false },
    { url_key: live, public_id: 'evt_2', status: 'delivered', last_error: null, leased: false },
    { url_key: deleted, public_id: 'evt_1', status: 'dead', last_error: 'endpoint_deleted', leased: false },
    { url_key: deleted, public_id: 'evt_2', status: 'dead', last_error: 'endpoint_deleted', leased: true },
  ]);
});
