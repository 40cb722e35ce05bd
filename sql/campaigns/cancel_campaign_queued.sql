-- Named statement cancel_campaign_queued, in src/campaigns/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

  with target as (
    -- Through underwriting_requests_campaign_open (no order: the queue's index would walk every queued request).
    select id from underwriting_requests
     where campaign_id = $1 and status = 'queued'
     limit $3
     for update skip locked
  ),
  cancelled as (
    -- One primary-key lookup per id (a join let the planner hash the whole table).
    update underwriting_requests r
       set status = 'cancelled', queued_body = null, updated_at = $2
     where r.id = any (array(select id from target))
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
  select count(*)::int as n from cancelled;
