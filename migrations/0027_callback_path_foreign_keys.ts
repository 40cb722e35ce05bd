import { type Kysely, sql } from 'kysely';

// Three of the four foreign keys the callback statement had the database check on every result
// are dropped (underwriting_requests.result_callback_id, callbacks.request_id, events.request_id):
// each was a trigger's lookup per row into a row the same statement had just locked or written
// (the request is locked `for update`, the callback is its own insert), so none could fail, and
// together with the fourth they were a third of the statement's buffers and a sixth of the
// backends' CPU per callback (docs/performance.md, "Foreign keys"). What they also did is done by
// the statements that delete: retention deletes a request's idempotency keys, callbacks, events
// and deliveries in its batch (src/retention/sweep.ts); erasure deletes the subject's events by
// request, by callback and by customer (src/personal-data/sql.ts).
// Kept: events.callback_id (on delete cascade), because an instance of the version before this one
// still erases during a rolling deploy and relies on it to take the event of an unmatched callback
// that names another customer; event_deliveries.event_id (on delete cascade),
// idempotency_keys.request_id and underwriting_requests.campaign_id.
// test/db/no-orphans.test.ts runs the lifecycle (callbacks matched, duplicate, unmatched and
// invalid; expiry; erasure; retention) and finds no row referring to a row that is gone.
// Frozen once landed: change the schema with a new file.

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table underwriting_requests drop constraint underwriting_requests_result_fk`.execute(db);
  await sql`alter table callbacks drop constraint callbacks_request_id_fkey`.execute(db);
  await sql`alter table events drop constraint events_request_id_fkey`.execute(db);
}

// Added NOT VALID: a row written while they were gone is not checked (the statements keep these
// references; an operator's SQL may not have), only what is written from now on.
export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table events add constraint events_request_id_fkey foreign key (request_id) references underwriting_requests (id) on delete cascade not valid`.execute(db);
  await sql`alter table callbacks add constraint callbacks_request_id_fkey foreign key (request_id) references underwriting_requests (id) not valid`.execute(db);
  await sql`alter table underwriting_requests add constraint underwriting_requests_result_fk foreign key (result_callback_id) references callbacks (id) not valid`.execute(db);
}
