-- Query reserve_in_flight_slots (builder), in src/events/endpoint-limits-sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

with cur as (
  select key, in_flight from event_endpoints where key = $1 for no key update
),
held as (
  select cur.key,
         coalesce((cur.in_flight -> $2::text ->> 'n')::int, 0) as mine,
         coalesce(sum((x.v ->> 'n')::int) filter (where (x.v ->> 'until')::timestamptz > now()), 0) as others,
         count(x.h) filter (where (x.v ->> 'until')::timestamptz <= now()) as expired,
         coalesce(jsonb_object_agg(x.h, x.v) filter (where (x.v ->> 'until')::timestamptz > now()), '{}'::jsonb) as kept
  from cur
  left join lateral jsonb_each(cur.in_flight) as x(h, v) on x.h <> $3::text
  group by cur.key, cur.in_flight
),
g as (select held.*, least($4::int, greatest(0, $5::int - held.others - $6::int)) as granted from held),
u as (
  update event_endpoints e
  set in_flight = case when $7::int + g.granted = 0 then g.kept
                       else g.kept || jsonb_build_object($8::text, jsonb_build_object(
                              'n', $9::int + g.granted, 'until', now() + make_interval(secs => $10::float8))) end
  from g
  where e.key = g.key and (g.granted > 0 or g.expired > 0 or g.mine <> $11::int)
)
select granted from g;
