-- Query read_campaign_row (builder), in src/campaigns/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

select id, public_id, created_at, updated_at, status, source, created_by, accepted, rejected, rejected_lines,
uploaded_at, upload_error, cancelled_at from campaigns where public_id = $1;
