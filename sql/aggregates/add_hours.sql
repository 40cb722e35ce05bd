-- Query add_hours (builder), in src/aggregates/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

insert into statistics_hourly (hour)
select g.hour from (
  select coalesce(
           (select max(s.hour) + interval '1 hour' from statistics_hourly s),
           -- Each kind on its own: min() is then one step of callbacks_stray.
           least((select date_bin(interval '1 hour', min(r.submitted_at), timestamptz '2000-01-01 00:00:00+00') from underwriting_requests r),
                 (select date_bin(interval '1 hour', min(c.received_at), timestamptz '2000-01-01 00:00:00+00') from callbacks c where c.outcome = 'unmatched'),
                 (select date_bin(interval '1 hour', min(c.received_at), timestamptz '2000-01-01 00:00:00+00') from callbacks c where c.outcome = 'invalid'))) as first
) f
cross join generate_series(f.first, $1::timestamptz - interval '1 hour', interval '1 hour') as g(hour)
on conflict (hour) do nothing;
