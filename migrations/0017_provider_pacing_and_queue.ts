import { type Kysely, sql } from 'kysely';

// Issue 37: calls to the provider are paced across every instance, and a submit may be queued
// (Prefer: respond-async) and forwarded later (docs/provider-pacing.md).
// Frozen once landed: change the schema with a new file.

const STATUSES_BEFORE = `'submitting', 'submitted', 'submit_failed', 'expired', 'completed'`;
const EVENT_TYPES_BEFORE = `'underwriting.completed', 'underwriting.submit_failed', 'underwriting.expired', 'callback.unmatched', 'endpoint.disabled'`;

export async function up(db: Kysely<unknown>): Promise<void> {
  // `queued`: stored, not yet sent; `cancelled`: queued, then withdrawn before it was sent.
  await sql`alter table underwriting_requests drop constraint underwriting_requests_status_check`.execute(db);
  await sql`alter table underwriting_requests add constraint underwriting_requests_status_check
    check (status in ('queued', ${sql.raw(STATUSES_BEFORE)}, 'cancelled'))`.execute(db);
  // A queued request holds its customer as one in flight does: a second submit is 409 in_flight.
  await sql`drop index underwriting_requests_one_in_flight`.execute(db);
  await sql`create unique index underwriting_requests_one_in_flight
    on underwriting_requests (customer_uuid) where status in ('queued', 'submitting', 'submitted')`.execute(db);
  // queued_at: when it was queued (null for a synchronous submit). queued_body: the body to
  // forward, AES-256-GCM sealed (it holds the full CPF), only while the request is queued: the
  // forwarder takes it out in the very statement that claims the request. forward_attempts: sends
  // that the provider certainly did not receive, each followed by a return to the queue.
  await sql`alter table underwriting_requests
    add column queued_at timestamptz,
    add column queued_body bytea,
    add column forward_attempts integer not null default 0,
    add constraint underwriting_requests_queued_body_check check (queued_body is null or status = 'queued')`.execute(db);
  // The forwarder's claim: the oldest queued request, whatever the table's size.
  await sql`create index underwriting_requests_queue on underwriting_requests (id) where status = 'queued'`.execute(db);

  await sql`alter table events drop constraint events_type_check`.execute(db);
  await sql`alter table events add constraint events_type_check check (type in
    (${sql.raw(EVENT_TYPES_BEFORE)}, 'underwriting.queued', 'underwriting.submitted', 'underwriting.cancelled'))`.execute(db);

  // The provider's pace, shared by every instance: one row. In second window_s (Unix seconds)
  // `used` calls have started; none starts before hold_until (the provider's Retry-After, or a
  // backoff); `failures` counts consecutive failed calls: at the threshold the circuit is open
  // until open_until, then one instance probes (probe_until is its lease).
  await sql`
    create table provider_pacing (
      id smallint primary key check (id = 1),
      window_s bigint not null default 0,
      used integer not null default 0,
      hold_until timestamptz not null default '-infinity',
      failures integer not null default 0,
      open_until timestamptz,
      probe_until timestamptz
    )`.execute(db);
  await sql`insert into provider_pacing (id) values (1)`.execute(db);
  // Calls in flight, one leased row per call: a killed instance's lease runs out by itself.
  // Rows are added on demand up to PROVIDER_MAX_IN_FLIGHT (slot < the limit is what counts).
  await sql`
    create table provider_slots (
      slot integer primary key,
      lease_until timestamptz not null default '-infinity',
      holder text
    )`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table provider_slots`.execute(db);
  await sql`drop table provider_pacing`.execute(db);
  await sql`delete from events where type in ('underwriting.queued', 'underwriting.submitted', 'underwriting.cancelled')`.execute(db);
  await sql`alter table events drop constraint events_type_check`.execute(db);
  await sql`alter table events add constraint events_type_check check (type in (${sql.raw(EVENT_TYPES_BEFORE)}))`.execute(db);
  await sql`drop index underwriting_requests_queue`.execute(db);
  await sql`delete from underwriting_requests where status in ('queued', 'cancelled')`.execute(db);
  await sql`alter table underwriting_requests drop constraint underwriting_requests_queued_body_check,
    drop column forward_attempts, drop column queued_body, drop column queued_at`.execute(db);
  await sql`drop index underwriting_requests_one_in_flight`.execute(db);
  await sql`create unique index underwriting_requests_one_in_flight
    on underwriting_requests (customer_uuid) where status in ('submitting', 'submitted')`.execute(db);
  await sql`alter table underwriting_requests drop constraint underwriting_requests_status_check`.execute(db);
  await sql`alter table underwriting_requests add constraint underwriting_requests_status_check
    check (status in (${sql.raw(STATUSES_BEFORE)}))`.execute(db);
}
