-- Named statement mark_forwarded, in src/submissions/queue.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

  with not_waited as (select set_config('synchronous_commit', 'off', true) as off),
  answered as (
    -- The provider's answer is kept whatever the request became meanwhile (as mark_submitted does):
    -- its callback may have completed it before this write. Only a request still being sent
    -- becomes submitted, with its event.
    update underwriting_requests
       set status = case when status = 'submitting' then 'submitted' else status end,
           upstream_status = $1,
           upstream_error = case when status = 'submitting' then null else upstream_error end,
           updated_at = $2
     where id = $3
    returning id, customer_uuid, status, decision, cpf_masked, cost_saving_enabled, srd,
submitted_at, completed_at, upstream_status, updated_at, traceparent, x_request_id
  ),
  forwarded as (select * from answered where status = 'submitted'),
  event_source as (
    select 'underwriting.submitted' as type, r.customer_uuid, r.updated_at as created_at,
           r.id as request_id, null::bigint as callback_id, jsonb_build_object(
  'customerUuid', r.customer_uuid, 'status', r.status, 'decision', r.decision,
  'cpfMasked', r.cpf_masked, 'costSavingEnabled', r.cost_saving_enabled, 'srd', r.srd,
  'submittedAt', case when r.status in ('queued', 'cancelled') then null else to_char(r.submitted_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') end, 'completedAt', to_char(r.completed_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
  'upstreamStatus', r.upstream_status, 'result', null::jsonb) as data,
           r.traceparent, r.x_request_id
    from forwarded r
  ),

  new_events as (
    insert into events (public_id, type, customer_uuid, created_at, request_id, callback_id, data, traceparent, x_request_id)
    select 'evt_' || lpad(to_hex((extract(epoch from clock_timestamp()) * 1000)::bigint), 12, '0') || substr(md5(gen_random_uuid()::text), 1, 20), s.type, s.customer_uuid, s.created_at,
           s.request_id, s.callback_id, s.data, s.traceparent, s.x_request_id
    from event_source s
    order by s.customer_uuid
    returning id
  ),
  -- The answered call's slot back (provider/pacing.ts, Permit.handOver), in this statement rather
  -- than a return of its own.
  handed as (select $4::int as slot, $5::text as holder),
  freed as (
    update provider_slots s set lease_until = '-infinity', holder = null
      from handed h
     where s.slot = any (array(select slot from handed where slot is not null)) and s.slot = h.slot and s.holder = h.holder
    returning s.slot
  ),
  closed as (
    update provider_pacing p set failures = 0, open_until = null
     where p.id = 1 and (p.failures <> 0 or p.open_until is not null) and exists (select 1 from handed where slot is not null)
    returning p.id
  )
  select f.id from answered f, not_waited;
