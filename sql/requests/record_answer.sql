-- Query record_answer (builder), in src/requests/idempotency.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

update "idempotency_keys" set "request_id" = $1, "response_status" = $2, "response_body" = $3 where "key" = $4;
