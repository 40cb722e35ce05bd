-- Named statement mark_submitted, in src/requests/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

update underwriting_requests
   set status = case when status = 'submitting' then 'submitted' else status end,
       upstream_status = $1, updated_at = $2
 where id = $3
returning id;
