-- Query update_endpoint_every_change (builder), in src/events/endpoints/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

update "event_endpoints" set "updated_at" = $1, "url" = $2, "shown_url" = $3, "description" = $4, "types" = $5, "rate_limit_per_s" = $6, "max_in_flight" = $7, "status" = $8, "disabled_reason" = $9, "failing_since" = $10 where "id" = $11 returning *;

update "event_dispatch" set "url" = $1 where "url_key" = $2;

update "event_deliveries" set "url" = $1 where "url_key" = $2 and "status" = $3 and "url" <> $4;

update "event_deliveries" set "queued_at" = $1, "next_attempt_at" = $2 where "url_key" = $3 and "status" = $4;
