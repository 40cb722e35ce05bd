-- Query resolve_subject_by_cpf (builder), in src/personal-data/subject.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

select distinct "customer_uuid" from "underwriting_requests" where "cpf_hash" in ($1, $2) order by "customer_uuid";
