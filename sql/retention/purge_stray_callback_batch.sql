-- Query purge_stray_callback_batch (builder), in src/retention/sweep.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

set local enable_seqscan = off;

select pg_advisory_xact_lock_shared(4127708853940019163);

select c.id from callbacks c
 where c.outcome in ('unmatched', 'invalid') and c.received_at < $1
 limit $2
 for update skip locked;

insert into statistics_hourly (hour, unmatched, invalid)
select date_bin(interval '1 hour', c.received_at, timestamptz '2000-01-01 00:00:00+00'), count(*) filter (where c.outcome = 'unmatched'),
       count(*) filter (where c.outcome = 'invalid')
  from callbacks c
 where c.id = any ($1::bigint[])
 group by 1
 order by 1
on conflict (hour) do update set
  unmatched = statistics_hourly.unmatched + excluded.unmatched,
  invalid = statistics_hourly.invalid + excluded.invalid;

with e as (delete from events where callback_id = any ($1::bigint[]) returning id),
     d as (delete from event_deliveries where event_id = any (array(select id from e)) returning 1),
     c as (delete from callbacks where id = any ($2::bigint[]) returning 1)
select 0 as underwriting_requests, (select count(*) from c)::int as callbacks, 0 as idempotency_keys,
       (select count(*) from e)::int as events, (select count(*) from d)::int as event_deliveries, 0 as campaigns;
