-- Named statement mark_submit_failed, in src/requests/store.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

  with failed as (
    update underwriting_requests
    set status = 'submit_failed', upstream_status = $1, upstream_error = $2, updated_at = $3
    where id = $4 and status = 'submitting'
    returning id, customer_uuid, status, decision, cpf_masked, cost_saving_enabled, srd,
submitted_at, completed_at, upstream_status, updated_at, traceparent, x_request_id
  ),
  event_source as (
    select 'underwriting.submit_failed' as type, f.customer_uuid, f.updated_at as created_at,
           f.id as request_id, null::bigint as callback_id, jsonb_build_object(
  'customerUuid', f.customer_uuid, 'status', f.status, 'decision', f.decision,
  'cpfMasked', f.cpf_masked, 'costSavingEnabled', f.cost_saving_enabled, 'srd', f.srd,
  'submittedAt', case when f.status in ('queued', 'cancelled') then null else to_char(f.submitted_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') end, 'completedAt', to_char(f.completed_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
  'upstreamStatus', f.upstream_status, 'result', null::jsonb) as data,
           f.traceparent, f.x_request_id
    from failed f
  ),

  new_events as (
    insert into events (public_id, type, customer_uuid, created_at, request_id, callback_id, data, traceparent, x_request_id)
    select 'evt_' || replace(gen_random_uuid()::text, '-', ''), s.type, s.customer_uuid, s.created_at,
           s.request_id, s.callback_id, s.data, s.traceparent, s.x_request_id
    from event_source s
    order by s.customer_uuid
    returning id
  )
  select customer_uuid from failed;
