-- Query release_key (builder), in src/requests/idempotency.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

delete from "idempotency_keys" where "key" = $1 and "response_status" is null;
