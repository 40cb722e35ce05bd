-- Query rotate_endpoint_secret (builder), in src/events/endpoints/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

update "event_endpoints" set "secret" = $1, "previous_secret" = $2, "previous_expires_at" = $3, "updated_at" = $4 where "id" = $5;
