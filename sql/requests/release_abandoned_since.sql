-- Query release_abandoned_since (builder), in src/requests/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

select "id", "customer_uuid" from "underwriting_requests" where "status" = $1 and "submitted_at" < $2 and "submitted_at" >= $3 limit $4;
