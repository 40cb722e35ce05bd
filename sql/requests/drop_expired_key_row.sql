-- Query drop_expired_key_row (builder), in src/requests/key-digest-pass.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

delete from idempotency_keys where key = $1 and expires_at <= $2;
