-- Query update_endpoint (builder), in src/events/endpoints/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

update "event_endpoints" set "updated_at" = $1, "description" = $2 where "id" = $3 returning *;
