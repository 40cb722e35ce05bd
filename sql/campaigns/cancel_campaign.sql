-- Query cancel_campaign (builder), in src/campaigns/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

update campaigns set status = 'cancelled', cancelled_at = coalesce(cancelled_at, $1), updated_at = $2
 where public_id = $3
returning id;
