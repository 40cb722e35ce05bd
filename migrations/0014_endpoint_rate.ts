import { type Kysely, sql } from 'kysely';

// An endpoint's rate limit holds across every instance: in each second (rate_window, Unix
// seconds) the instances reserve attempt slots (rate_used) up to rate_limit_per_s.
// Frozen once landed: change the schema with a new file.

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table event_endpoints add column rate_window bigint, add column rate_used integer not null default 0`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table event_endpoints drop column rate_window, drop column rate_used`.execute(db);
}
