-- Query stored_key_of (builder), in src/requests/idempotency.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

select "key" from "idempotency_keys" where "key" in ($1, $2) and "expires_at" > $3 order by "created_at" desc limit $4;
