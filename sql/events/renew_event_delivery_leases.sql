-- Named statement renew_event_delivery_leases, in src/events/queue-sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

update event_deliveries d
set lease_until = $1::timestamptz + make_interval(secs => $2::double precision)
from unnest($3::bigint[], $4::text[]) as l(id, token)
where d.id = l.id and d.lease_token = l.token and d.status = 'pending'
returning d.id;
