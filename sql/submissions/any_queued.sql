-- Named statement any_queued, in src/submissions/queue.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

select exists (select 1 from underwriting_requests where status = 'queued') as any;
