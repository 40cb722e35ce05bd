-- Query insert_endpoint (builder), in src/events/endpoints/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

insert into "event_endpoints" ("id", "key", "managed", "url", "shown_url", "description", "types", "rate_limit_per_s", "max_in_flight", "status", "secret", "created_at", "updated_at") values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) returning *;

insert into event_dispatch (url_key, url, tx_id, event_id, updated_at)
values ($1, $2, $3::xid8, 0, $4)
on conflict (url_key) do nothing;
