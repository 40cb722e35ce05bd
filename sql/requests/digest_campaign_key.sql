-- Query digest_campaign_key (builder), in src/requests/key-digest-pass.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

update campaigns set idempotency_key = $1
where id = $2 and idempotency_key = $3 and not exists (select 1 from campaigns where idempotency_key = $4);

update campaigns set idempotency_key = null where id = $1 and idempotency_key = $2;
