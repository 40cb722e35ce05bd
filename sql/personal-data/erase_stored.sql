-- Query erase_stored (builder), in src/personal-data/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

set local enable_seqscan = off;

select "id", "status", "idempotency_key" from "underwriting_requests" where "customer_uuid" in ($1, $2) order by "id" for update;

select c.id, c.customer_uuid, c.outcome, c.cpf_hashes,
       -- The bytes only where they decide (callbackOfSubject): an invalid callback naming no customer.
       case when c.outcome = 'invalid' and c.customer_uuid is null then c.raw_body end as raw_body
  from callbacks c
 where "c"."request_id" in ($1)
    or (c.request_id is null and "c"."customer_uuid" in ($2, $3))
    or ("c"."cpf_hashes" is not null and "c"."cpf_hashes" && $4::text[])
    or ("c"."outcome" = 'invalid' and "c"."customer_uuid" is null
and exists (select 1 from json_array_elements_text($5::json) as n(v)
            where position(convert_to(n.v, 'UTF8') in "c"."raw_body") > 0));

delete from events where "request_id" in ($1);

delete from events where "callback_id" in ($1);

delete from "events" where "customer_uuid" in ($1, $2);

delete from "idempotency_keys" where ("request_id" in ($1) or ("request_id" is null and "response_status" is not null and "key" in ($2)));

with gone_callbacks as (
  delete from callbacks c where "c"."id" in ($1)
  returning c.id
),
gone_requests as (
  delete from underwriting_requests r where "r"."id" in ($2) returning r.id
)
select (select count(*) from gone_requests)::int as requests, (select count(*) from gone_callbacks)::int as callbacks;
