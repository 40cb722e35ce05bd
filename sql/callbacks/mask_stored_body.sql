-- Query mask_stored_body (builder), in src/callbacks/body-mask-pass.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

update callbacks set raw_body = $1, body = $2::jsonb, cpf_hashes = $3::text[]
where id = $4 and raw_body = $5;
