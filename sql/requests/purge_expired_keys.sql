-- Query purge_expired_keys (builder), in src/requests/idempotency.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

delete from "idempotency_keys" where "key" in (select "key" from "idempotency_keys" where "expires_at" <= $1 limit $2);
