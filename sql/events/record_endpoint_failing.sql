-- Query record_endpoint_failing (builder), in src/events/endpoint-limits-sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

update "event_endpoints" set "failing_since" = coalesce(failing_since, $1::timestamptz) where "key" = $2;
