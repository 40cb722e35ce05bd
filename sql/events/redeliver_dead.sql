-- Query redeliver_dead (builder), in src/events/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

with queued as (
  update event_deliveries d
  set status = 'pending', attempts = 0, queued_at = $1, next_attempt_at = $2, lease_until = null, lease_token = null
  from events e
  where e.id = d.event_id and d.status = 'dead' and d.url_key = any($3::text[])
    and e.created_at >= $4::timestamptz
    and e.created_at < $5::timestamptz
  returning 1
)
select count(*)::int as n from queued;
