-- Named statement return_to_queue, in src/submissions/queue.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

update underwriting_requests
   set status = 'queued', queued_body = $2, submitted_at = queued_at, updated_at = $3,
       forward_attempts = forward_attempts + 1, upstream_status = $4, upstream_error = $5
 where id = $1 and status = 'submitting'
returning id;
