-- Query list_campaigns_after (builder), in src/campaigns/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

set local enable_seqscan = off;

select c.id, c.public_id, c.created_at, c.status, c.source, c.accepted, c.rejected, c.uploaded_at, c.updated_at, c.upload_error,
       exists (select 1 from underwriting_requests r
                where r.campaign_id = c.id and r.status in ('queued', 'submitting', 'submitted')) as open,
       to_char(c.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as position_t
  from campaigns c
 where (c.created_at, c.id) < ($1::timestamptz, $2::bigint)
 order by c.created_at desc, c.id desc
 limit $3;
