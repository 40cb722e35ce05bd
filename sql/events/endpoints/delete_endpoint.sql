-- Query delete_endpoint (builder), in src/events/endpoints/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

delete from "event_endpoints" where "id" = $1;

delete from "event_dispatch" where "url_key" = $1;

update "event_deliveries" set "status" = $1, "last_error" = $2, "lease_until" = case when lease_until > $3 then lease_until end, "lease_token" = case when lease_until > $4 then lease_token end, "next_attempt_at" = $5 where "url_key" = $6 and "status" = $7;
