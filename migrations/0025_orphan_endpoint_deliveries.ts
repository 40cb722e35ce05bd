import { type Kysely, sql } from 'kysely';

// Repairs what a delivery worker of the versions before could leave: with a read of the endpoints
// that predated a DELETE /v1/endpoints/:id (its registry's up to 500 ms, or an instance starting),
// its first claim wrote the deleted API endpoint's dispatch position back, and its dispatches then
// wrote that endpoint pending deliveries that nothing ever ends (src/events/worker.ts no longer
// starts API endpoints' positions). Here those deliveries end as the DELETE ends a backlog (dead,
// endpoint_deleted; one leased right now keeps its lease, for its attempt to end as it ends), and
// the positions go. Only API endpoints' keys (`ep_`, their id): a configured URL's position may
// precede its row (the row is written at start), and is the configuration's to end.
// Frozen once landed: change the schema with a new file.

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`delete from event_dispatch d
    where d.url_key like 'ep\\_%' and not exists (select 1 from event_endpoints e where e.key = d.url_key)`.execute(db);
  await sql`update event_deliveries x
       set status = 'dead', last_error = 'endpoint_deleted', next_attempt_at = now(),
           lease_until = case when x.lease_until > now() then x.lease_until end,
           lease_token = case when x.lease_until > now() then x.lease_token end
     where x.status = 'pending' and x.url_key like 'ep\\_%'
       and not exists (select 1 from event_endpoints e where e.key = x.url_key)`.execute(db);
}

export async function down(): Promise<void> {
  // A repair: nothing to undo.
}
