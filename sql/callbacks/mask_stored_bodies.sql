-- Query mask_stored_bodies (builder), in src/callbacks/body-mask-pass.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

insert into "maintenance_passes" ("name") values ($1) on conflict ("name") do nothing;

select "through_id", "finished_at" from "maintenance_passes" where "name" = $1;

select "id", "raw_body", "body", "request_id", "cpf_hashes", "received_at" as "written_at" from "callbacks" where "id" > $1 order by "id" limit $2;

update maintenance_passes set finished_at = coalesce(finished_at, $1) where name = $2;
