-- Query mask_stored_srd_events (builder), in src/submissions/srd-mask-pass.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

update events e set data = jsonb_set(e.data, '{srd}', v.after)
from (select unnest($1::bigint[]) as id, unnest($2::jsonb[]) as before,
             unnest($3::jsonb[]) as after) v
where e.id = any($4::bigint[]) and e.id = v.id and e.data -> 'srd' = v.before;
