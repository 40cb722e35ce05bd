-- Query stored_endpoint_keys (builder), in src/events/endpoints/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

with recursive walk(key) as (
  (select url_key from event_deliveries order by url_key limit 1)
  union all
  select (select d.url_key from event_deliveries d where d.url_key > w.key order by d.url_key limit 1) from walk w where w.key is not null
),
keys(key) as (
  select key from walk where key is not null
  union select key from event_endpoints
  union select url_key from event_dispatch
)
select key from keys
where key = any($1::text[]) or ($2::boolean and key ~ '^[0-9a-f]{32}$');
