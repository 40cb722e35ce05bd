-- Query digest_key_row (builder), in src/requests/key-digest-pass.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

update idempotency_keys set key = $1
where key = $2 and not exists (select 1 from idempotency_keys where key = $3);

delete from idempotency_keys where key = $1;
