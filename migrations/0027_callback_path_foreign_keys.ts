import { type Kysely, sql } from 'kysely';

// The four foreign keys the callback statement had the database check on every result
// (underwriting_requests.result_callback_id, callbacks.request_id, events.request_id,
// events.callback_id) are dropped: each was a lookup per row, by a trigger, into a row the same
// statement had just locked or written (the request is locked `for update`, the callback and the
// event are its own inserts), so none could fail. They were a third of the statement's buffers and
// a sixth of the backends' CPU per callback (docs/performance.md, "Foreign keys"). What they also
// did is done by the statements that delete: retention deletes a request's idempotency keys,
// callbacks, events and deliveries in its batch (src/retention/sweep.ts), erasure deletes the
// subject's events by request, by callback and by customer (src/personal-data/sql.ts): the cascade
// from requests and callbacks to events is no longer relied on. Kept: event_deliveries.event_id
// (events to deliveries, on delete cascade), idempotency_keys.request_id and
// underwriting_requests.campaign_id. test/db/no-orphans.test.ts runs the lifecycle (submit,
// callback, stray callbacks, expiry, erasure, retention) and finds no row referring to a row gone.
// Frozen once landed: change the schema with a new file.

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table underwriting_requests drop constraint underwriting_requests_result_fk`.execute(db);
  await sql`alter table callbacks drop constraint callbacks_request_id_fkey`.execute(db);
  await sql`alter table events drop constraint events_request_id_fkey`.execute(db);
  await sql`alter table events drop constraint events_callback_id_fkey`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table events add constraint events_callback_id_fkey foreign key (callback_id) references callbacks (id) on delete cascade`.execute(db);
  await sql`alter table events add constraint events_request_id_fkey foreign key (request_id) references underwriting_requests (id) on delete cascade`.execute(db);
  await sql`alter table callbacks add constraint callbacks_request_id_fkey foreign key (request_id) references underwriting_requests (id)`.execute(db);
  await sql`alter table underwriting_requests add constraint underwriting_requests_result_fk foreign key (result_callback_id) references callbacks (id)`.execute(db);
}
