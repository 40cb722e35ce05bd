-- Query request_of_key (builder), in src/requests/idempotency.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

select "id", "customer_uuid", "status", "upstream_status", "upstream_error", "submitted_at", "queued_at" from "underwriting_requests" where "idempotency_key" in ($1, $2) and "submitted_at" > $3 order by "id" desc limit $4;
