-- Query redeliver_by_type (builder), in src/events/redelivery-sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

with live as (select key from event_endpoints where key = any($1::text[]) for key share),
queued as (
  update event_deliveries d
  set status = 'pending', attempts = 0, queued_at = $2, next_attempt_at = $3, lease_until = null, lease_token = null,
      delivered_at = null
  from events e, unnest($4::text[], $5::text[]) as t(key, types)
  where e.id = d.event_id and d.status = $6 and d.url_key = t.key and t.key in (select key from live)
    and (t.types is null or e.type = any(string_to_array(t.types, ',')))
    and e.type = $7


  returning 1
)
select count(*)::int as n from queued;
