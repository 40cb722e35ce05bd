-- Named statement read_customer, in src/queries/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

select k.n::int as n, x.*
  from unnest($1::text[]) with ordinality as k(customer_uuid, n)
 cross join lateral (
  (select 'request' as kind, r.id, r.customer_uuid, r.status, r.decision, r.cpf_masked,
          r.cost_saving_enabled, r.srd, r.submitted_at, r.completed_at, r.upstream_status,
          -- Per request, by primary key: a join let the planner, without statistics, hash
          -- every callback stored to find a customer's few results.
          (select c.body from callbacks c where c.id = r.result_callback_id) as result,
          null::timestamptz as received_at
     from underwriting_requests r
    where r.customer_uuid = k.customer_uuid
    order by r.id desc
    limit $2)
  union all
  (select 'unmatched', u.id, null::text, null::text, null::text, null::text,
          null::boolean, null::jsonb, null::timestamptz, null::timestamptz, null::integer,
          u.body, u.received_at
     from callbacks u
    where u.customer_uuid = k.customer_uuid and u.outcome = 'unmatched'
    order by u.id desc
    limit $3)
 ) x;
