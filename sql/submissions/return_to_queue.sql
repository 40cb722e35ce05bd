-- Named statement return_to_queue, in src/submissions/queue.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

  with campaign as (
    select c.status from campaigns c
     where c.id = (select campaign_id from underwriting_requests where id = $1)
     for share
  ),
  requeued as (
    update underwriting_requests
       set status = 'queued', queued_body = $2, submitted_at = queued_at, updated_at = $3,
           forward_attempts = forward_attempts + case when $6 then 1 else 0 end,
           upstream_status = case when $6 then $4 else upstream_status end,
           upstream_error = case when $6 then $5 else upstream_error end
     where id = $1 and status = 'submitting'
       and not exists (select 1 from campaign where status = 'cancelled')
    returning id
  ),
  cancelled as (
    update underwriting_requests r
       set status = 'cancelled', queued_body = null, submitted_at = queued_at, updated_at = $3,
           forward_attempts = forward_attempts + case when $6 then 1 else 0 end,
           upstream_status = case when $6 then $4 else upstream_status end,
           upstream_error = case when $6 then $5 else upstream_error end
     where r.id = $1 and r.status = 'submitting'
       and exists (select 1 from campaign where status = 'cancelled')
    returning id, customer_uuid, status, decision, cpf_masked, cost_saving_enabled, srd,
submitted_at, completed_at, upstream_status, updated_at, traceparent, x_request_id
  ),
  event_source as (
    select 'underwriting.cancelled' as type, r.customer_uuid, r.updated_at as created_at,
           r.id as request_id, null::bigint as callback_id, jsonb_build_object(
  'customerUuid', r.customer_uuid, 'status', r.status, 'decision', r.decision,
  'cpfMasked', r.cpf_masked, 'costSavingEnabled', r.cost_saving_enabled, 'srd', r.srd,
  'submittedAt', case when r.status in ('queued', 'cancelled') then null else to_char(r.submitted_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') end, 'completedAt', to_char(r.completed_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
  'upstreamStatus', r.upstream_status, 'result', null::jsonb) as data,
           r.traceparent, r.x_request_id
    from cancelled r
  ),

  new_events as (
    insert into events (public_id, type, customer_uuid, created_at, request_id, callback_id, data, traceparent, x_request_id)
    select 'evt_' || lpad(to_hex((extract(epoch from clock_timestamp()) * 1000)::bigint), 12, '0') || substr(md5(gen_random_uuid()::text), 1, 20), s.type, s.customer_uuid, s.created_at,
           s.request_id, s.callback_id, s.data, s.traceparent, s.x_request_id
    from event_source s
    order by s.customer_uuid
    returning id
  )
  select 'queued' as became from requeued
  union all
  select 'cancelled' from cancelled;
