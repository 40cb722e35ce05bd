-- Query digest_stored_keys (builder), in src/requests/key-digest-pass.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

insert into "maintenance_passes" ("name") values ($1) on conflict ("name") do nothing;

select "through_id", "finished_at" from "maintenance_passes" where "name" = $1;

select "key" from "idempotency_keys" where "key" > $1 order by "key" limit $2;

select "id", "idempotency_key" from "campaigns" where "idempotency_key" is not null and "created_at" <= $1;

select "id", "idempotency_key", "submitted_at" from "underwriting_requests" where "id" > $1 order by "id" limit $2;

update maintenance_passes set finished_at = coalesce(finished_at, $1) where name = $2;
