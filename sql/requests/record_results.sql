-- Named statement record_results, in src/requests/complete.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

with input as (
  select * from json_to_recordset($1::json) as i(
    n int, customer_uuid text, received_at timestamptz, peer text, raw_body text, cpf_hashes text[],
    started timestamptz, finished timestamptz, body jsonb, decision text, x_request_id text, traceparent text)
),
target as materialized (
  select i.n, t.id
  from input i
  cross join lateral (
    select r.id from underwriting_requests r
    where r.customer_uuid = i.customer_uuid and r.result_callback_id is null
      -- A late result of an older request never completes one submitted after its pipeline
      -- started. Served by underwriting_requests_awaiting_result: a customer's few entries,
      -- never a range of all requests submitted before started (docs/performance.md).
      and r.submitted_at <= i.started + make_interval(secs => $2::double precision)
      -- Never sent (still queued, or cancelled): no result can be its.
      and r.status not in ('queued', 'cancelled')
    order by r.id desc
    limit 1
    for update
  ) t
),
inserted as (
  insert into callbacks
    (received_at, peer, raw_body, cpf_hashes, outcome, customer_uuid, started, finished, body, decision, request_id)
  select i.received_at, i.peer, decode(i.raw_body, 'base64'),
         -- A request's result is found through its request; the hashes find the others (migration 0026).
         case when t.id is null then i.cpf_hashes end,
         case when t.id is null then 'unmatched' else 'matched' end,
         i.customer_uuid, i.started, i.finished, i.body, i.decision, t.id
  from input i left join target t on t.n = i.n
  order by i.n
  on conflict (customer_uuid, started, finished) do nothing
  returning id, customer_uuid, request_id, received_at, decision, body
),
completed as (
  update underwriting_requests r
  set status = 'completed', completed_at = x.received_at, updated_at = x.received_at,
      result_callback_id = x.id, decision = x.decision
  from inserted x
  -- The = any(array) is what the planner looks up by primary key; the join alone would
  -- (with json_to_recordset's guess of 100 rows) scan a table of tens of thousands.
  where r.id = any (array(select request_id from inserted where request_id is not null))
    and r.id = x.request_id
  returning r.id, r.submitted_at, r.customer_uuid, r.status, r.decision, r.cpf_masked,
            r.cost_saving_enabled, r.srd, r.completed_at, r.upstream_status, x.id as callback_id, x.body,
            r.traceparent, r.x_request_id
),
event_source as (
  select 'underwriting.completed' as type, c.customer_uuid, c.completed_at as created_at,
         c.id as request_id, c.callback_id, jsonb_build_object(
'customerUuid', c.customer_uuid, 'status', c.status, 'decision', c.decision,
'cpfMasked', c.cpf_masked, 'costSavingEnabled', c.cost_saving_enabled, 'srd', c.srd,
'submittedAt', case when c.status in ('queued', 'cancelled') then null else to_char(c.submitted_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') end, 'completedAt', to_char(c.completed_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
'upstreamStatus', c.upstream_status, 'result', c.body) as data,
         c.traceparent, c.x_request_id
  from completed c
  union all
  -- An unmatched callback's event carries the callback's own trace and request id.
  select 'callback.unmatched', x.customer_uuid, x.received_at, null::bigint, x.id, jsonb_build_object('customerUuid', x.customer_uuid, 'receivedAt', to_char(x.received_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'result', x.body),
         i.traceparent, i.x_request_id
  from inserted x join input i on i.customer_uuid = x.customer_uuid where x.request_id is null
),

new_events as (
  insert into events (public_id, type, customer_uuid, created_at, request_id, callback_id, data, traceparent, x_request_id)
  select 'evt_' || lpad(to_hex((extract(epoch from clock_timestamp()) * 1000)::bigint), 12, '0') || substr(md5(gen_random_uuid()::text), 1, 20), s.type, s.customer_uuid, s.created_at,
         s.request_id, s.callback_id, s.data, s.traceparent, s.x_request_id
  from event_source s
  order by s.customer_uuid
  returning id
)
select i.n, x.id, x.request_id, c.submitted_at, c.traceparent as submit_traceparent
from inserted x
join input i on i.customer_uuid = x.customer_uuid
left join completed c on c.id = x.request_id;
