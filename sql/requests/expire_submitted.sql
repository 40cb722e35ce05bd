-- Named statement expire_submitted, in src/requests/expiry.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

    with due as (
      select id from underwriting_requests
      where status = 'submitted' and submitted_at < $1 and submitted_at >= $3
      limit 1000
      for update skip locked
    ),
    expired as (
      update underwriting_requests r
      set status = 'expired', updated_at = $2
      from due
      where r.id = due.id and r.status = 'submitted'
      returning r.id, r.customer_uuid, r.status, r.decision, r.cpf_masked, r.cost_saving_enabled, r.srd,
r.submitted_at, r.completed_at, r.upstream_status, r.updated_at, r.traceparent, r.x_request_id
    ),
    event_source as (
    select 'underwriting.expired' as type, r.customer_uuid, r.updated_at as created_at,
           r.id as request_id, null::bigint as callback_id, jsonb_build_object(
  'customerUuid', r.customer_uuid, 'status', r.status, 'decision', r.decision,
  'cpfMasked', r.cpf_masked, 'costSavingEnabled', r.cost_saving_enabled, 'srd', r.srd,
  'submittedAt', case when r.status in ('queued', 'cancelled') then null else to_char(r.submitted_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') end, 'completedAt', to_char(r.completed_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
  'upstreamStatus', r.upstream_status, 'result', null::jsonb) as data,
           r.traceparent, r.x_request_id
    from expired r
  ),

  new_events as (
    insert into events (public_id, type, customer_uuid, created_at, request_id, callback_id, data, traceparent, x_request_id)
    select 'evt_' || lpad(to_hex((extract(epoch from clock_timestamp()) * 1000)::bigint), 12, '0') || substr(md5(gen_random_uuid()::text), 1, 20), s.type, s.customer_uuid, s.created_at,
           s.request_id, s.callback_id, s.data, s.traceparent, s.x_request_id
    from event_source s
    order by s.customer_uuid
    returning id
  )
    select id, customer_uuid from expired;
