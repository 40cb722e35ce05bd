-- Query record_invalid (builder), in src/callbacks/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

insert into "callbacks" ("received_at", "peer", "raw_body", "cpf_hashes", "outcome", "error", "customer_uuid", "body") values ($1, $2, $3, $4, $5, $6, $7, $8) returning "id";
