-- Query read_feed (builder), in src/events/feed-sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

select "e"."id", "e"."public_id", "e"."type", "e"."created_at", e.tx_id::text as "tx_id", "e"."data", (
select jsonb_agg(x.delivery order by x.written desc, x.ord)
from (
  select true as written, d.id as ord, jsonb_build_object(
           'url', d.url, 'status', d.status, 'attempts', d.attempts,
           'last_attempt_at', d.last_attempt_at, 'last_status', d.last_status, 'last_error', d.last_error) as delivery
  from event_deliveries d where d.event_id = e.id
  union all
  select false, array_position($1::text[], c.url_key), jsonb_build_object(
           'url', c.url, 'status', 'pending', 'attempts', 0,
           'last_attempt_at', null, 'last_status', null, 'last_error', null)
  from event_dispatch c left join event_endpoints p on p.key = c.url_key
  where c.url_key = any($2::text[]) and (c.tx_id, c.event_id) < (e.tx_id, e.id)
    and (p.types is null or e.type = any(p.types))
    and not exists (select 1 from event_deliveries d where d.event_id = e.id and d.url_key = c.url_key)
) x) as "deliveries" from "events" as "e" where e.tx_id < $3::xid8 order by e.tx_id, "e"."id" limit $4;
