import { type Kysely, sql } from 'kysely';

// Issue 36: what migration 0016 left of the configured endpoints' old ids.
// Before 0016 a configured endpoint's id was "ep_" and its key, the unsalted SHA-256 of its URL
// (32 hex digits), so that a dump let anyone confirm a guessed URL (and a secret in it). 0016 gave
// the rows that still had such an id a random one, and renamed their audit subjects and
// endpoint.disabled events. It left the old id where it did not look: the deliveries of those
// events (event_deliveries.customer_uuid is the event's customer, here the endpoint's id), and
// every mention of an endpoint whose row was gone (deleted by hand) or written with an old id
// after 0016 (an instance still running the old code).
// Here every stored "ep_<hex>" whose hex is a configured URL's key (of an endpoint row, a dispatch
// position or a delivery) becomes the endpoint's current id, or a new random one when its row has
// none, in the endpoint row, audit subjects and endpoint.disabled events; the deliveries of those
// events follow their event's customer. API endpoints' ids (random, their key is the id) stay.
// Frozen once landed: change the schema with a new file.

const LEGACY_ID = '^ep_[0-9a-f]{32}$';

export async function up(db: Kysely<unknown>): Promise<void> {
  // One statement: the new ids are drawn once (a materialized CTE is computed once).
  await sql`
    with stored(id) as (
      select customer_uuid from events where type = 'endpoint.disabled'
      union select data ->> 'endpointId' from events where type = 'endpoint.disabled'
      union select substr(subject, length('endpoint:') + 1) from audit_log where subject like 'endpoint:%'
      union select id from event_endpoints where managed = 'config'
    ),
    legacy as materialized (
      select s.id as old_id, substr(s.id, 4) as k from stored s
      where s.id ~ ${LEGACY_ID}
        and (exists (select 1 from event_endpoints e where e.managed = 'config' and e.key = substr(s.id, 4))
          or exists (select 1 from event_dispatch c where c.url_key = substr(s.id, 4))
          or exists (select 1 from event_deliveries d where d.url_key = substr(s.id, 4)))
    ),
    renamed as materialized (
      select l.old_id,
             coalesce((select e.id from event_endpoints e where e.managed = 'config' and e.key = l.k and e.id <> l.old_id),
                      'ep_' || replace(gen_random_uuid()::text, '-', '')) as new_id
      from legacy l
    ),
    audited as (
      update audit_log a set subject = 'endpoint:' || r.new_id from renamed r where a.subject = 'endpoint:' || r.old_id
    ),
    recorded as (
      update events e
      set customer_uuid = case when e.customer_uuid = r.old_id then r.new_id else e.customer_uuid end,
          data = case when e.data ->> 'endpointId' = r.old_id then jsonb_set(e.data, '{endpointId}', to_jsonb(r.new_id)) else e.data end
      from renamed r
      where e.type = 'endpoint.disabled' and (e.customer_uuid = r.old_id or e.data ->> 'endpointId' = r.old_id)
    )
    update event_endpoints e set id = r.new_id from renamed r where e.id = r.old_id`.execute(db);
  // Their deliveries name the event's customer (0016 renamed the events, not these).
  await sql`
    update event_deliveries d set customer_uuid = e.customer_uuid
    from events e
    where e.type = 'endpoint.disabled' and d.event_id = e.id and d.customer_uuid <> e.customer_uuid`.execute(db);
}

export async function down(): Promise<void> {
  // The old ids are not kept anywhere: nothing to restore.
}
