import { type Kysely, sql } from 'kysely';

// Issue 34 (submit ≥ 1.0x) and 37: a call may start in the last 300 ms of a second (past the
// spread, SPREAD_MS in src/provider/sql.ts). Before, none did: every synchronous submit arriving
// then waited for the next second (a p99 of ~340 ms at any load, docs/provider-pacing.md). Such a
// call may reach the provider in this second or the next, so it counts in both: in `used` (this
// second, window_s) and in `used_next`, which becomes the next second's `used` when that second
// comes. The provider then sees at most the limit in any second, whichever second the call lands in.
// Frozen once landed: change the schema with a new file.

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table provider_pacing add column used_next integer not null default 0`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table provider_pacing drop column used_next`.execute(db);
}
