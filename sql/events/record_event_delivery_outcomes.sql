-- Named statement record_event_delivery_outcomes, in src/events/queue-sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

update event_deliveries d
-- A delivery ended dead while its attempt was in flight (its endpoint deleted: it kept its
-- lease) becomes delivered if the receiver took it, and stays dead, saying why, otherwise.
set status = case when d.status = 'dead' and o.status <> 'delivered' then d.status else o.status end,
    attempts = d.attempts + 1, last_attempt_at = o.at, last_status = o.http_status,
    last_error = case when d.status = 'dead' and o.status <> 'delivered' then d.last_error else o.error end,
    next_attempt_at = coalesce(o.next_at, d.next_attempt_at),
    delivered_at = case when o.status = 'delivered' then o.at end, lease_until = null, lease_token = null,
    url = case when o.status <> 'pending' or d.status = 'dead' then coalesce(o.url, d.url) else d.url end
from json_to_recordset($1::json) as o(id bigint, token text, status text, at timestamptz, http_status int, error text, next_at timestamptz, url text)
where d.id = o.id and d.lease_token = o.token;
