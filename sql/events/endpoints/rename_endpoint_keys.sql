-- Query rename_endpoint_keys (builder), in src/events/endpoints/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

select pg_advisory_xact_lock(7302512093411875001);

delete from event_endpoints n using event_endpoints o
where ((n.key = $1 and o.key = $2) or (n.key = $3 and o.key = $4)) and (n.created_at, n.id) > (o.created_at, o.id);

update "event_endpoints" set "key" = $1 where "key" = $2;

update event_dispatch n set tx_id = o.tx_id, event_id = o.event_id
from event_dispatch o
where n.url_key = $1 and o.url_key = $2 and (o.tx_id, o.event_id) < (n.tx_id, n.event_id);

delete from event_dispatch o where o.url_key = $1 and exists (select 1 from event_dispatch n where n.url_key = $2);

update "event_dispatch" set "url_key" = $1 where "url_key" = $2;

delete from event_deliveries o
where o.url_key = $1 and exists (select 1 from event_deliveries n where n.event_id = o.event_id and n.url_key = $2);

update "event_deliveries" set "url_key" = $1 where "url_key" = $2;
