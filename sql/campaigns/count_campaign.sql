-- Named statement count_campaign, in src/campaigns/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

select status, decision, count(*)::int as n,
       (count(*) filter (where status not in ('queued', 'cancelled') and submitted_at >= $2))::int as recent
  from underwriting_requests
 where campaign_id = $1
 group by status, decision;
