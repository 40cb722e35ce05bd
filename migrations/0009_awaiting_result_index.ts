import { type Kysely, sql } from 'kysely';

// A customer's requests still without a result, newest first: what a callback looks for. Only
// those rows are in it (a request leaves it when completed), so finding the one a result belongs
// to reads a customer's few waiting entries whatever the table's size or statistics, instead of
// ANDing the customer's entries with every request submitted before `started` (docs/performance.md).
// Frozen once landed: change the schema with a new file.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create index underwriting_requests_awaiting_result
    on underwriting_requests (customer_uuid, id desc) where result_callback_id is null`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index underwriting_requests_awaiting_result`.execute(db);
}
