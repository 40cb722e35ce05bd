import { type Kysely, sql } from 'kysely';

// Where an underwriting's later hops find its trace and its X-Request-Id: the submit stores its
// server span's W3C traceparent and its request id; every event copies its request's (or, for an
// unmatched callback, the callback's), so that each pushed attempt continues the same trace and
// carries the same X-Request-Id, on whichever instance sends it. Nullable, no default: adding them
// rewrites no row. Frozen once landed: change the schema with a new file.

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table underwriting_requests add column traceparent text, add column x_request_id text`.execute(db);
  await sql`alter table events add column traceparent text, add column x_request_id text`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table events drop column traceparent, drop column x_request_id`.execute(db);
  await sql`alter table underwriting_requests drop column traceparent, drop column x_request_id`.execute(db);
}
