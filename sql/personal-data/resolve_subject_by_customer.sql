-- Query resolve_subject_by_customer (builder), in src/personal-data/subject.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

select distinct "cpf_hash" from "underwriting_requests" where "customer_uuid" = $1 order by "cpf_hash";
