-- Named statement return_to_queue, in src/submissions/queue.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

update underwriting_requests
   set status = 'queued', queued_body = $2, submitted_at = queued_at, updated_at = $3,
       forward_attempts = forward_attempts + case when $6 then 1 else 0 end,
       upstream_status = case when $6 then $4 else upstream_status end,
       upstream_error = case when $6 then $5 else upstream_error end
 where id = $1 and status = 'submitting'
returning id;
