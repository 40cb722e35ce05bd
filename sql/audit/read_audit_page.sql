-- Query read_audit_page (builder), in src/audit/trail.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

select "a"."id", "a"."at", "a"."action", "a"."actor", "a"."subject", "a"."counts", to_char(a.at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as "position_t" from "audit_log" as "a" order by "a"."at" desc, "a"."id" desc limit $1;
