-- Named statement provider_read_pace, in src/provider/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

select p.failures, coalesce(p.open_until > clock_timestamp(), false) as open,
     -- hold_until is '-infinity' when nothing ever held (a subtraction from it is out of range)
     (case when p.hold_until > clock_timestamp() then extract(epoch from p.hold_until - clock_timestamp()) * 1000 else 0 end)::float8 as held_ms,
     (select count(*) from provider_slots s where s.slot < $1 and s.lease_until > clock_timestamp())::int as in_flight
from provider_pacing p where p.id = 1;
