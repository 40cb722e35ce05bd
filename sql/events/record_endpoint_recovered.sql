-- Query record_endpoint_recovered (builder), in src/events/endpoint-limits-sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

update "event_endpoints" set "failing_since" = $1 where "key" = $2 and "failing_since" is not null;
