-- Query abandon_upload (builder), in src/campaigns/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

update campaigns set status = 'cancelled', upload_error = $1, cancelled_at = coalesce(cancelled_at, $2), updated_at = $3
where id = $4;
