-- Query endpoint_keys (builder), in src/events/endpoints/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

select "key" from "event_endpoints" where ("managed" = $1 or "key" in ($2));
