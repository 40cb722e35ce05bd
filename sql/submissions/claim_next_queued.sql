-- Named statement claim_next_queued, in src/submissions/queue.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

with next as (
  select id, queued_body from underwriting_requests
  where status = 'queued' and id > $2
  order by id
  limit 1
  for update skip locked
)
update underwriting_requests r
   set status = 'submitting', queued_body = null, submitted_at = $1, updated_at = $1
  from next
 where r.id = next.id
returning r.id, r.customer_uuid, next.queued_body, r.traceparent, r.x_request_id, r.forward_attempts;
