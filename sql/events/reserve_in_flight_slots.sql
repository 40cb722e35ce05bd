-- Query reserve_in_flight_slots (builder), in src/events/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

with cur as (
  select key, in_flight from event_endpoints where key = $1 for update
),
held as (
  select cur.key,
         coalesce((cur.in_flight -> $2::text ->> 'n')::int, 0) as mine,
         coalesce(sum((x.v ->> 'n')::int) filter (where x.h is not null), 0) as others,
         coalesce(jsonb_object_agg(x.h, x.v) filter (where x.h is not null), '{}'::jsonb) as kept
  from cur
  left join lateral jsonb_each(cur.in_flight) as x(h, v)
    on x.h <> $3::text and (x.v ->> 'until')::timestamptz > $4::timestamptz
  group by cur.key, cur.in_flight
),
g as (select held.*, least($5::int, greatest(0, $6::int - held.others - held.mine)) as granted from held),
u as (
  update event_endpoints e
  set in_flight = case when g.mine + g.granted = 0 then g.kept
                       else g.kept || jsonb_build_object($7::text, jsonb_build_object('n', g.mine + g.granted, 'until', $8::timestamptz)) end
  from g where e.key = g.key
  returning g.granted
)
select granted from u;
