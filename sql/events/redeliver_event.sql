-- Query redeliver_event (builder), in src/events/redelivery-sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

  with e as (select id, customer_uuid, type from events where public_id = $1),
  live as (select key from event_endpoints where key = any($2::text[]) for key share),
  queued as (
    insert into event_deliveries (event_id, customer_uuid, url_key, url, queued_at, next_attempt_at)
    select e.id, e.customer_uuid, t.key, t.shown, $3, $4
    from e cross join unnest($5::text[], $6::text[], $7::text[]) as t(key, shown, types)
    where (t.types is null or e.type = any(string_to_array(t.types, ',')))
      and t.key in (select key from live)
    on conflict (event_id, url_key) do update set url = excluded.url, status = 'pending', attempts = 0, queued_at = excluded.queued_at,
next_attempt_at = excluded.next_attempt_at, lease_until = null, lease_token = null, delivered_at = null
    returning 1
  )
  select (select count(*) from e)::int as found, (select count(*) from queued)::int as queued;
