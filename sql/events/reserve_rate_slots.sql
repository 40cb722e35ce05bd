-- Query reserve_rate_slots (builder), in src/events/endpoint-limits-sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

with cur as (
  select key, case when rate_window = $1::bigint then rate_used else 0 end as used
  from event_endpoints where key = $2 for no key update
),
g as (select cur.key, cur.used, least($3::int, greatest(0, $4::int - cur.used)) as granted from cur),
u as (
  update event_endpoints e set rate_window = $5::bigint, rate_used = g.used + g.granted
  from g where e.key = g.key
  returning g.granted
)
select granted from u;
