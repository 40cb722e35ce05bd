-- Named statement campaign_results_page, in src/campaigns/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

select r.id, r.customer_uuid, r.status, r.decision, r.cpf_masked, r.completed_at,
       -- By primary key per row: the result's response only.
       (select c.body -> 'response' from callbacks c where c.id = r.result_callback_id) as response
  from underwriting_requests r
 -- The position as a row of the index's own columns: only underwriting_requests_campaign serves
 -- it (with r.id > $2 alone the planner may walk the primary key, filtering out other rows).
 where r.campaign_id = $1 and (r.campaign_id, r.id) > ($1::bigint, $2::bigint)
 order by r.campaign_id, r.id
 limit $3;
