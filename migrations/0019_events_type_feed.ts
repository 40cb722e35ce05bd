import { type Kysely, sql } from 'kysely';

// The feed filtered by type, in feed order: without it, a page of a rare type walked events_feed
// and filtered, reading every event of other types written since the consumer's position
// (docs/performance.md). Frozen once landed: change the schema with a new file.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create index events_type_feed on events (type, tx_id, id)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index events_type_feed`.execute(db);
}
