-- Named statement insert_submitting, in src/requests/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

insert into underwriting_requests
  (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, srd, status, idempotency_key, submitted_at, updated_at,
   traceparent, x_request_id)
values ($1, $2, $3, $4, $5, 'submitting', $6, $7, $7, $8, $9)
returning id;
