-- Named statement enqueue_submits_campaign, in src/submissions/queue.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

  with input as (
    select * from rows from (
        unnest($1::text[]), unnest($2::text[]), unnest($3::text[]), unnest($4::boolean[]),
        unnest($5::text[]), unnest($6::text[]), unnest($7::text[]), unnest($8::text[]),
        jsonb_array_elements($9::jsonb)
      ) with ordinality as i(customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, idempotency_key, queued_body, traceparent, x_request_id, srd, n)
  ),
  numbered as (
    -- Ids in the batch's order (a campaign's: its file's, the order of its results), taken before
    -- the rows are inserted in another (a CTE with a volatile function is computed once, as written).
    select i.*, nextval('underwriting_requests_id_seq') as id from input i order by i.n
  ),
  queued as (
    insert into underwriting_requests
      (id, customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, srd, status, idempotency_key,
       submitted_at, updated_at, queued_at, queued_body, traceparent, x_request_id, campaign_id)
    overriding system value
    select i.id, i.customer_uuid, i.cpf_hash, i.cpf_masked, i.cost_saving_enabled, nullif(i.srd, 'null'::jsonb), 'queued', i.idempotency_key,
           $10, $10, $10, decode(i.queued_body, 'base64'), i.traceparent, i.x_request_id, $11
    from numbered i
    -- A customer an earlier line of the campaign's file named, whose request is no longer in flight
    -- (answered, failed): a file names each customer once. One lookup of the customer's requests per
    -- row (underwriting_requests_customer): offset 0 keeps it from becoming a join. The campaign's
    -- indexes, whose every entry so far it would read per row, are kept out of it: they hold only
    -- rows with a campaign, and coalesce (not strict, unlike + 0) does not tell the planner that
    -- these are such rows. Statistics taken before a first campaign made them look empty, the
    -- cheapest of all, and each line read every entry the campaign had so far. Bounded below by the
    -- campaign's first request (one probe of the campaign's index, once per statement): the
    -- customer's requests from before the campaign, however many, are not read.
    where not exists (
      select 1 from underwriting_requests e
       where e.customer_uuid = i.customer_uuid
         and e.id >= (select min(f.id) from underwriting_requests f where f.campaign_id = $11)
         and coalesce(e.campaign_id, 0) = $11
      offset 0)
    -- Inserted in one order whatever the batch (byte order, as insert_submitting's): two batches
    -- naming the same customers in other orders (two campaigns at once) wait on each other's
    -- in-flight index entries instead of deadlocking; within a customer, the batch's order.
    order by i.customer_uuid collate "C", i.n
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
    select 'evt_' || lpad(to_hex((extract(epoch from clock_timestamp()) * 1000)::bigint), 12, '0') || substr(md5(gen_random_uuid()::text), 1, 20), s.type, s.customer_uuid, s.created_at,
           s.request_id, s.callback_id, s.data, s.traceparent, s.x_request_id
    from event_source s
    order by s.customer_uuid
    returning id
  )
  select id, customer_uuid from queued;
