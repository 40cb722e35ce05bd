-- Query start_dispatch (builder), in src/events/queue-sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

insert into event_dispatch (url_key, url, tx_id, event_id, updated_at)
select t.key, t.shown, $1::xid8, 0, $2 from unnest($3::text[], $4::text[]) as t(key, shown)
on conflict (url_key) do nothing;
