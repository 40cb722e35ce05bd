-- Query read_endpoints (builder), in src/events/endpoints/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

select * from "event_endpoints" order by "created_at", "id";
