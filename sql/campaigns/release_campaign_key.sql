-- Query release_campaign_key (builder), in src/campaigns/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

update campaigns set idempotency_key = null where id = $1;
