import { type Kysely, sql } from 'kysely';

// Issue 34 (submit ≥ 1.0x) and 37: a call may start in the last 300 ms of a second (past the
// spread, SPREAD_MS in src/provider/sql.ts). Before, none did: every synchronous submit arriving
// then waited for the next second (a p99 of ~340 ms at any load, docs/provider-pacing.md). Such a
// call may reach the provider in this second or the next, so it counts in both: once a tail call
// started in second f, the row counts second f + 1 (window_s = f + 1, used: the tail's calls) and
// keeps f's own count, tail calls included, in `used_prev`. The provider then sees at most the limit
// in any second, whichever second the call lands in. An instance of the version before (a rolling
// deploy) reads window_s and used alone: it sees f + 1's calls as they are, and in f's tail it
// refuses (window_s ahead of its second), so it never starts more than the limit either.
// Frozen once landed: change the schema with a new file.

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table provider_pacing add column used_prev integer not null default 0`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table provider_pacing drop column used_prev`.execute(db);
}
