import { type Kysely, sql } from 'kysely';

// A request's result callback is unique only where there is one. The full unique index held an
// entry for every request still waiting, and on tables without statistics (a server without
// autovacuum, or before its first analyze) the planner ANDed those NULL entries with the customer
// index to find "the customer's newest request without a result": work growing with the table on
// every callback. Partial, it cannot serve `result_callback_id is null`, and a submit no longer
// writes an entry in it. Same uniqueness: NULLs were never equal to each other.
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
