-- Query read_deliveries_by_url (builder), in src/stats/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

select url, status, count(*)::bigint as n from (
  select d.url, 'pending' as status from event_deliveries d where d.status = 'pending'
  union all
  select d.url, 'dead' as status from event_deliveries d where d.status = 'dead'
  union all

select c.url, 'pending' as status from event_dispatch c left join event_endpoints p on p.key = c.url_key
  join events e on (e.tx_id, e.id) > (c.tx_id, c.event_id) and (p.types is null or e.type = any(p.types))
 where c.url_key = any($1::text[])
) x
 group by url, status
 order by url, status;
