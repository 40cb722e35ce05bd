-- Query release_deliveries (builder), in src/events/queue-sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

update "event_deliveries" set "lease_until" = $1, "lease_token" = $2 where "id" in ($3) and "lease_token" = $4;
