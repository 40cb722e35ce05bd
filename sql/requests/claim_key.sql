-- Query claim_key (builder), in src/requests/idempotency.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

insert into "idempotency_keys" ("key", "body_hash", "created_at", "expires_at") values ($1, $2, $3, $4) on conflict ("key") do update set "body_hash" = $5, "created_at" = $6, "expires_at" = $7, "request_id" = $8, "response_status" = $9, "response_body" = $10 where "idempotency_keys"."expires_at" <= $11 returning "key";

update "idempotency_keys" set "created_at" = $1 where "key" = $2 and "response_status" is null and "body_hash" = $3 and "created_at" <= $4 and "expires_at" > $5 returning "key";

select * from "idempotency_keys" where "key" = $1 and "expires_at" > $2;
