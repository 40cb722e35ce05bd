import { type Kysely, sql } from 'kysely';

// Work a new version does once over rows an earlier version wrote, which a migration cannot do
// because it needs the configuration (a key). The first: Idempotency-Keys stored as sent are
// rewritten as their keyed digests (src/requests/key-digest.ts, key-digest-pass.ts). A pass
// records how far it got (through_id: the highest row id it has read, for a table read by id) and
// when it first reached the end (finished_at); it goes on at each start for a while after that,
// for rows an instance of the earlier version wrote during a rolling deploy.
// Frozen once landed: change the schema with a new file.

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create table maintenance_passes (
    name text primary key,
    through_id bigint not null default 0,
    started_at timestamptz not null default now(),
    finished_at timestamptz
  )`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table maintenance_passes`.execute(db);
}
