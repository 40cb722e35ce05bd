-- Query count_campaigns_by_status (builder), in src/campaigns/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

set local enable_seqscan = off;

select case
         when c.status <> 'running' then c.status
         when (c.uploaded_at is not null or c.upload_error is not null or c.updated_at < $1)
              and not exists (select 1 from underwriting_requests r
                               where r.campaign_id = c.id and r.status in ('queued', 'submitting', 'submitted')) then 'done'
         else 'running'
       end as status,
       count(*)::int as n
  from campaigns c
 group by 1;
