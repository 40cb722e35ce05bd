-- Named statement enqueue_submits, in src/submissions/queue.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

  with input as (
    select * from json_to_recordset($1::json) as i(
      n int, customer_uuid text, cpf_hash text, cpf_masked text, cost_saving_enabled boolean, srd jsonb,
      idempotency_key text, queued_body text, traceparent text, x_request_id text)
  ),
  queued as (
    insert into underwriting_requests
      (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, srd, status, idempotency_key,
       submitted_at, updated_at, queued_at, queued_body, traceparent, x_request_id)
    select i.customer_uuid, i.cpf_hash, i.cpf_masked, i.cost_saving_enabled, i.srd, 'queued', i.idempotency_key,
           $2, $2, $2, decode(i.queued_body, 'base64'), i.traceparent, i.x_request_id
    from input i
    order by i.n
    -- A customer with a request queued or awaiting its callback (underwriting_requests_one_in_flight),
    -- or twice in one batch: the later one is not queued.
    on conflict do nothing
    returning id, customer_uuid, status, decision, cpf_masked, cost_saving_enabled, srd,
submitted_at, completed_at, upstream_status, updated_at, traceparent, x_request_id
  ),
  event_source as (
    select 'underwriting.queued' as type, q.customer_uuid, q.updated_at as created_at,
           q.id as request_id, null::bigint as callback_id, jsonb_build_object(
  'customerUuid', q.customer_uuid, 'status', q.status, 'decision', q.decision,
  'cpfMasked', q.cpf_masked, 'costSavingEnabled', q.cost_saving_enabled, 'srd', q.srd,
  'submittedAt', case when q.status in ('queued', 'cancelled') then null else to_char(q.submitted_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') end, 'completedAt', to_char(q.completed_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
  'upstreamStatus', q.upstream_status, 'result', null::jsonb) as data,
           q.traceparent, q.x_request_id
    from queued q
  ),

  new_events as (
    insert into events (public_id, type, customer_uuid, created_at, request_id, callback_id, data, traceparent, x_request_id)
    select 'evt_' || replace(gen_random_uuid()::text, '-', ''), s.type, s.customer_uuid, s.created_at,
           s.request_id, s.callback_id, s.data, s.traceparent, s.x_request_id
    from event_source s
    order by s.customer_uuid
    returning id
  )
  select id, customer_uuid from queued;
