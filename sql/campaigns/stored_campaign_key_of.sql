-- Query stored_campaign_key_of (builder), in src/campaigns/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

select idempotency_key from campaigns where idempotency_key in ($1, $2)
   and created_at > $3
 order by created_at desc limit 1;
