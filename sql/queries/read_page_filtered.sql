-- Query read_page_filtered (builder), in src/queries/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

set local enable_sort = off;

set local enable_sort = off;

select "r"."id", "r"."customer_uuid", "r"."status", "r"."decision", "r"."cpf_masked", "r"."cost_saving_enabled", "r"."srd", "r"."submitted_at", "r"."completed_at", "r"."upstream_status", "c"."body" as "result", to_char(r.submitted_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as "position_t" from "underwriting_requests" as "r" left join "callbacks" as "c" on "c"."id" = "r"."result_callback_id" where "r"."status" = $1 and "r"."decision" = $2 and "r"."cpf_hash" = $3 and r.submitted_at >= $4::timestamptz and r.submitted_at < $5::timestamptz and (r.submitted_at, r.id) < ($6::timestamptz, $7::bigint) order by "r"."submitted_at" desc, "r"."id" desc limit $8;

select "r"."id", "r"."customer_uuid", "r"."status", "r"."decision", "r"."cpf_masked", "r"."cost_saving_enabled", "r"."srd", "r"."submitted_at", "r"."completed_at", "r"."upstream_status", "c"."body" as "result", to_char(r.submitted_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as "position_t" from "underwriting_requests" as "r" left join "callbacks" as "c" on "c"."id" = "r"."result_callback_id" where "r"."status" = $1 and "r"."decision" = $2 and "r"."cpf_hash" = $3 and r.submitted_at >= $4::timestamptz and r.submitted_at < $5::timestamptz and (r.submitted_at, r.id) < ($6::timestamptz, $7::bigint) order by "r"."submitted_at" desc, "r"."id" desc limit $8;
