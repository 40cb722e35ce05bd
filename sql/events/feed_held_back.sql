-- Query feed_held_back (builder), in src/events/feed-sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

select "e"."id" from "events" as "e" where e.tx_id >= $1::xid8 and (e.tx_id, e.id) > ($2::xid8, $3::bigint) limit $4;
