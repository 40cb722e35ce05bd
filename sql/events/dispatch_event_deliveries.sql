-- Named statement dispatch_event_deliveries, in src/events/queue-sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

with locked as (
  select d.url_key, d.tx_id, d.event_id from event_dispatch d
  where d.url_key = any($1::text[])
  for update skip locked
),
-- A position another instance moved after this statement's snapshot is left alone this time:
-- the deliveries it just wrote are not visible here, so the order rule could not see them.
c as (
  select l.* from locked l
  join event_dispatch v on v.url_key = l.url_key and v.tx_id = l.tx_id and v.event_id = l.event_id
),
picked as (
  select c.url_key, p.id, p.customer_uuid, p.created_at, p.tx_id
  from c join unnest($1::text[], $8::text[]) as f(key, types) on f.key = c.url_key
  cross join lateral (
    select e.id, e.customer_uuid, e.created_at, e.tx_id from events e
    where (e.tx_id, e.id) > (c.tx_id, c.event_id) and e.tx_id < $7::xid8
      and (f.types is null or e.type = any(string_to_array(f.types, ',')))
    order by e.tx_id, e.id
    limit $3
  ) p
),
numbered as (
  select p.*, row_number() over (partition by p.url_key, p.customer_uuid order by p.id) as nth from picked p
),
inserted as (
  insert into event_deliveries (event_id, customer_uuid, url_key, url, queued_at, next_attempt_at, lease_until, lease_token)
  select n.id, n.customer_uuid, n.url_key, t.shown, $6::timestamptz, n.created_at,
         case when l.leased then $5::timestamptz end, case when l.leased then $4::text end
  from numbered n
  join unnest($1::text[], $2::text[]) as t(key, shown) on t.key = n.url_key
  cross join lateral (
    select n.nth = 1 and not exists (
      select 1 from event_deliveries p
      where p.status = 'pending' and p.url_key = n.url_key and p.customer_uuid = n.customer_uuid) as leased
  ) l
  order by n.url_key, n.tx_id, n.id
  on conflict (event_id, url_key) do nothing
  returning id, event_id, url_key, customer_uuid, lease_token
),
counts as (select p.url_key, count(*) as n from picked p group by p.url_key),
last as (
  select distinct on (p.url_key) p.url_key, p.tx_id, p.id from picked p order by p.url_key, p.tx_id desc, p.id desc
),
moved as (
  update event_dispatch d
  -- Fewer than the limit: every event below the horizon is written.
  set tx_id = case when coalesce(k.n, 0) < $3 then $7::xid8 else l.tx_id end,
      event_id = case when coalesce(k.n, 0) < $3 then 0 else l.id end,
      updated_at = $6::timestamptz
  from c left join counts k on k.url_key = c.url_key left join last l on l.url_key = c.url_key
  where d.url_key = c.url_key
    and (case when coalesce(k.n, 0) < $3 then $7::xid8 else l.tx_id end,
         case when coalesce(k.n, 0) < $3 then 0 else l.id end) > (d.tx_id, d.event_id)
)
select f.full, x.id, x.url_key, x.customer_uuid, x.lease_token, e.public_id, e.created_at, json_build_object('id', e.public_id, 'type', e.type, 'timestamp', to_char(e.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'data', e.data)::text as body,
       e.traceparent, e.x_request_id
from (select coalesce(max(k.n), 0) >= $3 as full from counts k) f
left join (inserted x join events e on e.id = x.event_id) on true;
