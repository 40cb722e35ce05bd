-- Named statement readiness_probe, in src/db/readiness.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

select current_setting('transaction_read_only') = 'on' as read_only, exists (select 1 from underwriting_requests) as used;
