-- Query mark_done (builder), in src/campaigns/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

update campaigns set status = 'done', updated_at = $1 where id = $2 and status = 'running';
