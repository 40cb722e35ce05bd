-- Query delete_endpoint (builder), in src/events/endpoints/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

delete from "event_endpoints" where "id" = $1;

delete from "event_dispatch" where "url_key" = $1 returning "tx_id", "event_id";

insert into event_deliveries (event_id, customer_uuid, url_key, url, status, queued_at, next_attempt_at, last_error)
select e.id, e.customer_uuid, $1, $2, 'dead', $3, $4, 'endpoint_deleted'
from events e
where (e.tx_id, e.id) > ($5::xid8, $6::bigint)
  and ($7::text[] is null or e.type = any($8::text[]))
order by e.tx_id, e.id
on conflict (event_id, url_key) do nothing;

update "event_deliveries" set "status" = $1, "last_error" = $2, "lease_until" = case when lease_until > $3 then lease_until end, "lease_token" = case when lease_until > $4 then lease_token end, "next_attempt_at" = $5 where "url_key" = $6 and "status" = $7;
