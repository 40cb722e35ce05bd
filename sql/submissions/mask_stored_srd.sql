-- Query mask_stored_srd (builder), in src/submissions/srd-mask-pass.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

insert into "maintenance_passes" ("name") values ($1) on conflict ("name") do nothing;

select "through_id", "finished_at" from "maintenance_passes" where "name" = $1;

select "id", case when length(regexp_replace(replace((srd -> 'address')::text, '&#', '0'), '[\x01-\x2f\x3a-\x7f]+', '', 'g')) >= 11 then srd end as "srd", "submitted_at" as "written_at" from "underwriting_requests" where "id" > $1 order by "id" limit $2;

update maintenance_passes set finished_at = coalesce(finished_at, $1) where name = $2;

insert into "maintenance_passes" ("name") values ($1) on conflict ("name") do nothing;

select "through_id", "finished_at" from "maintenance_passes" where "name" = $1;

select "id", case when length(regexp_replace(replace((data -> 'srd' -> 'address')::text, '&#', '0'), '[\x01-\x2f\x3a-\x7f]+', '', 'g')) >= 11 then data -> 'srd' end as "srd", "created_at" as "written_at" from "events" where "id" > $1 order by "id" limit $2;

update maintenance_passes set finished_at = coalesce(finished_at, $1) where name = $2;
