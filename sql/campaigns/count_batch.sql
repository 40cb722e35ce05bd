-- Query count_batch (builder), in src/campaigns/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

update campaigns set accepted = accepted + $1, rejected = rejected + $2, updated_at = $3
where id = $4;
