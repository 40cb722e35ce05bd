-- Query read_stored (builder), in src/personal-data/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

set local enable_seqscan = off;

select "r"."id", "r"."customer_uuid", "r"."status", "r"."decision", "r"."cpf_masked", "r"."cost_saving_enabled", "r"."srd", "r"."submitted_at", "r"."completed_at", "r"."upstream_status", "c"."body" as "result", "r"."updated_at", "r"."upstream_error", "r"."idempotency_key" from "underwriting_requests" as "r" left join "callbacks" as "c" on "c"."id" = "r"."result_callback_id" where "r"."customer_uuid" in ($1, $2) order by "r"."id" desc;

select "c"."id", "c"."customer_uuid", "c"."outcome", "c"."received_at", "c"."body", "c"."error", "c"."raw_body", "c"."cpf_hashes" from "callbacks" as "c" where (("c"."outcome" in ($1, $2) and "c"."customer_uuid" in ($3, $4)) or ("c"."cpf_hashes" is not null and "c"."cpf_hashes" && $5::text[]) or ("c"."outcome" = 'invalid' and "c"."customer_uuid" is null
and exists (select 1 from json_array_elements_text($6::json) as n(v)
            where position(convert_to(n.v, 'UTF8') in "c"."raw_body") > 0))) order by "c"."id" desc;

select "e"."id", "e"."public_id", "e"."type", "e"."created_at", e.tx_id::text as "tx_id", "e"."data", (
select jsonb_agg(jsonb_build_object(
         'url', d.url, 'status', d.status, 'attempts', d.attempts,
         'last_attempt_at', d.last_attempt_at, 'last_status', d.last_status, 'last_error', d.last_error)
       order by d.id)
from event_deliveries d where d.event_id = e.id) as "deliveries" from "events" as "e" where "e"."customer_uuid" in ($1, $2) order by "e"."id" desc;
