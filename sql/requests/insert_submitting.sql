-- Named statement insert_submitting, in src/requests/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

insert into underwriting_requests
  (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, srd, status, idempotency_key, submitted_at, updated_at,
   traceparent, x_request_id)
select i.customer_uuid, i.cpf_hash, i.cpf_masked, i.cost_saving_enabled, i.srd, 'submitting', i.idempotency_key, i.at, i.at,
       i.traceparent, i.x_request_id
  from json_to_recordset($1::json) as i(
         n int, customer_uuid text, cpf_hash text, cpf_masked text, cost_saving_enabled boolean, srd jsonb,
         idempotency_key text, at timestamptz, traceparent text, x_request_id text)
 -- In one order whatever the batch (byte order, as JavaScript sorts): two instances' batches
 -- meeting on the same customers wait on each other's index entries instead of deadlocking.
 order by i.customer_uuid collate "C"
on conflict (customer_uuid) where status in ('submitting', 'submitted') do nothing
returning id, customer_uuid;
