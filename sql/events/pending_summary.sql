-- Query pending_summary (builder), in src/events/pending-sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

with written as (
  select count(*) as n, min(d.queued_at) as oldest from event_deliveries d where d.status = 'pending'
),
unwritten as (
select (select count(*) from event_dispatch c left join event_endpoints p on p.key = c.url_key
          join events e on (e.tx_id, e.id) > (c.tx_id, c.event_id) and (p.types is null or e.type = any(p.types))
         where c.url_key = any($1::text[])) as n,
       (select min(f.created_at) from event_dispatch c left join event_endpoints p on p.key = c.url_key
          cross join lateral (select e.created_at from events e where (e.tx_id, e.id) > (c.tx_id, c.event_id) and (p.types is null or e.type = any(p.types))
                               order by e.tx_id, e.id limit 1) f
         where c.url_key = any($2::text[])) as oldest)
select (w.n + u.n)::text as n, least(w.oldest, u.oldest) as oldest from written w, unwritten u;
