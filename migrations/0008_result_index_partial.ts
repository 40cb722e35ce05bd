import { type Kysely, sql } from 'kysely';

// Unique only where set (NULLs never collided): without statistics the planner used the full
// index's entry per waiting request to find a customer's request without a result (bench/README).
// Frozen once landed: change the schema with a new file.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create unique index underwriting_requests_result on underwriting_requests (result_callback_id)
    where result_callback_id is not null`.execute(db);
  await sql`alter table underwriting_requests drop constraint underwriting_requests_result_callback_id_key`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table underwriting_requests add constraint underwriting_requests_result_callback_id_key unique (result_callback_id)`.execute(db);
  await sql`drop index underwriting_requests_result`.execute(db);
}
