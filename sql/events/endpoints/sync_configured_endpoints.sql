-- Query sync_configured_endpoints (builder), in src/events/endpoints/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

insert into "event_endpoints" ("id", "key", "managed", "url", "shown_url", "description", "status", "created_at", "updated_at") values ($1, $2, $3, $4, $5, $6, $7, $8, $9) on conflict ("key") do update set "url" = "excluded"."url", "shown_url" = "excluded"."shown_url" where "event_endpoints"."shown_url" is distinct from "excluded"."shown_url";
