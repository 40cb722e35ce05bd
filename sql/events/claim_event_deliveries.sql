-- Named statement claim_event_deliveries, in src/events/queue-sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

with due as (
  select d.id from event_deliveries d
  where d.status = 'pending' and d.next_attempt_at <= $1::timestamptz
    and (d.lease_until is null or d.lease_until <= $1::timestamptz)
    -- Written so that the plan walks event_deliveries_due in order and stops at the limit,
    -- even on statistics from before a backlog: "url_key = any(...)" and "not exists" would
    -- let the planner read every pending delivery by event_deliveries_order (an index
    -- condition, a merge anti join) and sort them all: a claim in proportion to the backlog.
    and array_position($2::text[], d.url_key) is not null
    and (select p.id from event_deliveries p
         where p.status = 'pending' and p.url_key = d.url_key and p.customer_uuid = d.customer_uuid
           and p.event_id < d.event_id
         limit 1) is null
  order by d.next_attempt_at, d.id
  limit $3
  for update skip locked
)
update event_deliveries d
set lease_until = $1::timestamptz + make_interval(secs => $4::double precision), lease_token = $5,
    -- Its first attempt: eligible now (it may have waited behind a customer's earlier event),
    -- so its retry horizon counts from here.
    queued_at = case when d.attempts = 0 then greatest(d.queued_at, $1::timestamptz) else d.queued_at end
from due, events e
where d.id = due.id and e.id = d.event_id
returning d.id, d.url_key, d.customer_uuid, d.attempts, d.queued_at, e.public_id, e.created_at, json_build_object('id', e.public_id, 'type', e.type, 'timestamp', to_char(e.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'data', e.data)::text as body,
          e.traceparent, e.x_request_id;
