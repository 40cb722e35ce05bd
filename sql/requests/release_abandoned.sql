-- Query release_abandoned (builder), in src/requests/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

select set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true);

select "id", "customer_uuid" from "underwriting_requests" where "status" = $1 and "submitted_at" < $2 limit $3;
