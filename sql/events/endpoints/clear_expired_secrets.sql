-- Query clear_expired_secrets (builder), in src/events/endpoints/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

update "event_endpoints" set "previous_secret" = $1, "previous_expires_at" = $2 where "previous_expires_at" <= $3;
