-- Query release_in_flight_slots (builder), in src/events/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

update event_endpoints
set in_flight = case
      when $1::int is null or (in_flight -> $2::text ->> 'n')::int <= $3::int then in_flight - $4::text
      else jsonb_set(in_flight, array[$5::text],
                     jsonb_build_object('n', (in_flight -> $6::text ->> 'n')::int - $7::int, 'until', $8::timestamptz))
    end
where in_flight -> $9::text is not null
  and key = $10;
