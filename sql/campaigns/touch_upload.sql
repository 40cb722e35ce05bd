-- Query touch_upload (builder), in src/campaigns/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

update campaigns set updated_at = $1 where id = $2 and status = 'running' and uploaded_at is null;
