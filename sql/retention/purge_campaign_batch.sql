-- Query purge_campaign_batch (builder), in src/retention/sweep.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

set local enable_seqscan = off;

select pg_advisory_xact_lock_shared(4127708853940019163);

select c.id from campaigns c
 where c.created_at < $1 and c.updated_at < $2
   and not exists (select 1 from underwriting_requests r where r.campaign_id = c.id)
 limit $3
 for update skip locked;

with c as (delete from campaigns where id = any ($1::bigint[]) returning 1)
select 0 as underwriting_requests, 0 as callbacks, 0 as idempotency_keys, 0 as events, 0 as event_deliveries,
       (select count(*) from c)::int as campaigns;
