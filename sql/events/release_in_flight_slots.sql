-- Query release_in_flight_slots (builder), in src/events/endpoint-limits-sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

update event_endpoints
set in_flight = case when $1::int <= 0 then in_flight - $2::text
                     else in_flight || jsonb_build_object($3::text, jsonb_build_object(
                            'n', $4::int, 'until', now() + make_interval(secs => $5::float8))) end
where key = $6;
