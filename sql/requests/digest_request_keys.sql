-- Query digest_request_keys (builder), in src/requests/key-digest-pass.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

update underwriting_requests r set idempotency_key = v.digest
from (select unnest($1::bigint[]) as id, unnest($2::text[]) as key,
             unnest($3::text[]) as digest) v
where r.id = v.id and r.idempotency_key = v.key;
