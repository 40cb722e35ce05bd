-- Query notify_keys (builder), in src/channels/announcer.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

select set_config('synchronous_commit', 'off', true), pg_notify($1::text, c)::text
from unnest($2::text[]) as c;
