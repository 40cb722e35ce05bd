-- Query mask_stored_srd_requests (builder), in src/submissions/srd-mask-pass.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

update underwriting_requests r set srd = v.after
from (select unnest($1::bigint[]) as id, unnest($2::jsonb[]) as before,
             unnest($3::jsonb[]) as after) v
where r.id = any($4::bigint[]) and r.id = v.id and r.srd = v.before;
