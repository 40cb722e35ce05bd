-- Query release_unsent_of_key (builder), in src/requests/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

select "id", "customer_uuid" from "underwriting_requests" where "customer_uuid" = $1 and "status" = $2 and "idempotency_key" in ($3, $4);
