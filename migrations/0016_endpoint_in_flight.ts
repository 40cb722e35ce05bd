import { type Kysely, sql } from 'kysely';

// Issue 36, what was left of it:
// - max_in_flight: an endpoint's cap on attempts in flight, across every instance. Each instance
//   holds slots in in_flight ({"<holder>": {"n": slots, "until": instant}}), reserved in the
//   endpoint's row under its lock as rate_used is; a holder's entry that is past its `until` (its
//   instance died) counts no more.
// - event_deliveries_endpoint: an endpoint's deliveries by status and time of the last attempt,
//   so that GET /v1/endpoints counts them per endpoint by index instead of scanning every delivery.
// - A configured endpoint's id was "ep_" and the unsalted SHA-256 of its URL: a weak secret in
//   the URL could be guessed offline from the id. Those rows get a random id (kept in the row from
//   now on), and what named them by the old one (audit subjects, endpoint.disabled events) follows.
// Frozen once landed: change the schema with a new file.

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table event_endpoints
    add column max_in_flight integer check (max_in_flight between 1 and 100),
    add column in_flight jsonb not null default '{}'::jsonb`.execute(db);
  await sql`create index event_deliveries_endpoint on event_deliveries (url_key, status, last_attempt_at)`.execute(db);
  // One statement: the new ids are drawn once (a CTE read three times is computed once).
  await sql`
    with renamed as materialized (
      select id as old_id, 'ep_' || replace(gen_random_uuid()::text, '-', '') as new_id
      from event_endpoints where managed = 'config' and id = 'ep_' || key
    ),
    audited as (
      update audit_log a set subject = 'endpoint:' || r.new_id from renamed r where a.subject = 'endpoint:' || r.old_id
    ),
    recorded as (
      update events e set customer_uuid = r.new_id, data = jsonb_set(e.data, '{endpointId}', to_jsonb(r.new_id))
      from renamed r where e.type = 'endpoint.disabled' and e.customer_uuid = r.old_id
    )
    update event_endpoints e set id = r.new_id from renamed r where e.id = r.old_id`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index event_deliveries_endpoint`.execute(db);
  await sql`alter table event_endpoints drop column max_in_flight, drop column in_flight`.execute(db);
}
