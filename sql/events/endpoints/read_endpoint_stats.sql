-- Query read_endpoint_stats (builder), in src/events/endpoints/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

select k.key as url_key,
       (select count(*) from event_deliveries d where d.url_key = k.key and d.status = 'delivered')::int as delivered,
       (select count(*) from event_deliveries d where d.url_key = k.key and d.status = 'pending' and d.attempts > 0)::int as failed,
       (select count(*) from event_deliveries d where d.url_key = k.key and d.status = 'dead')::int as dead,
       l.last_attempt_at, l.last_status
from unnest($1::text[]) as k(key)
left join lateral (
  select x.last_attempt_at, x.last_status
  from unnest(array['pending', 'delivered', 'dead']::text[]) as s(status)
  cross join lateral (
    select d.last_attempt_at, d.last_status from event_deliveries d
    where d.url_key = k.key and d.status = s.status and d.last_attempt_at is not null
    order by d.last_attempt_at desc
    limit 1
  ) x
  order by x.last_attempt_at desc
  limit 1
) l on true;
