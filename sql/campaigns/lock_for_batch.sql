-- Query lock_for_batch (builder), in src/campaigns/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

select status from campaigns where id = $1 for share;
