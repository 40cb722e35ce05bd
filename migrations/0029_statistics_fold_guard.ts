import { type Kysely, sql } from 'kysely';

// A rolling deploy from the version before 0028 (docs/operations.md, Closed hours): its closing
// pass closes an hour by adding every row and stray callback of the hour to its counts, which is
// right for an hour no pass has folded and counts the folded part twice, for good, in one that a
// new instance's pass has. From this version on, a close clears the hour's watermarks
// (src/aggregates/sql.ts, closeHourQuery); an update that closes a folded hour without clearing
// them is an older instance's, and is skipped (its pass sees the hour as not closable and tries
// again, until it is replaced). Frozen once landed: change it with a new file.

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create function statistics_folded_close_guard() returns trigger language plpgsql as $$
    begin
      return null;
    end $$`.execute(db);
  await sql`
    create trigger statistics_folded_close_guard before update on statistics_hourly
    for each row when (old.closed_at is null and new.closed_at is not null
      and (old.folded_until is not null or old.stray_folded_until is not null)
      and (new.folded_until is not null or new.stray_folded_until is not null))
    execute function statistics_folded_close_guard()`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop trigger statistics_folded_close_guard on statistics_hourly`.execute(db);
  await sql`drop function statistics_folded_close_guard()`.execute(db);
}
