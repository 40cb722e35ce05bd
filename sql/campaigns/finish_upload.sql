-- Query finish_upload (builder), in src/campaigns/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

update campaigns
  set accepted = $1, rejected = $2, rejected_lines = $3::jsonb,
      uploaded_at = $4, updated_at = $5, body_digest = $6
where id = $7;
