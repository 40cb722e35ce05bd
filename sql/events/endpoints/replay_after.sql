-- Query replay_after (builder), in src/events/endpoints/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

with queued as (
  insert into event_deliveries (event_id, customer_uuid, url_key, url, queued_at, next_attempt_at)
  select e.id, e.customer_uuid, $1, $2, $3, $4
  from events e
  where (e.tx_id, e.id) > ($5::xid8, $6::bigint) and ($7::text[] is null or e.type = any($8::text[]))
  order by e.tx_id, e.id
  on conflict (event_id, url_key) do update set url = excluded.url, status = 'pending', attempts = 0,
    queued_at = excluded.queued_at, next_attempt_at = excluded.next_attempt_at, lease_until = null,
    lease_token = null, delivered_at = null
  returning 1
)
select count(*)::int as n from queued;
