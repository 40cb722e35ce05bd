-- Query purge_request_batch (builder), in src/retention/sweep.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

set local enable_seqscan = off;

select pg_advisory_xact_lock_shared(4127708853940019163);

select r.id from underwriting_requests r
 where r.submitted_at < $1 and r.updated_at < $2
   and r.status not in ('queued', 'submitting', 'submitted')
 order by r.submitted_at
 limit $3
 for update skip locked;

insert into statistics_hourly (hour, submitted, completed, expired, submit_failed, approved, declined, no_score, filtered)
select date_bin(interval '1 hour', r.submitted_at, timestamptz '2000-01-01 00:00:00+00'), count(*),
       count(*) filter (where r.status = 'completed'),
       count(*) filter (where r.status = 'expired'),
       count(*) filter (where r.status = 'submit_failed'),
       count(*) filter (where r.decision = 'approved'),
       count(*) filter (where r.decision = 'declined'),
       count(*) filter (where r.decision = 'no_score'),
       count(*) filter (where r.decision = 'filtered')
  from underwriting_requests r
 where r.id = any ($1::bigint[])
 group by 1
 order by 1
on conflict (hour) do update set
  submitted = statistics_hourly.submitted + excluded.submitted,
  completed = statistics_hourly.completed + excluded.completed,
  expired = statistics_hourly.expired + excluded.expired,
  submit_failed = statistics_hourly.submit_failed + excluded.submit_failed,
  approved = statistics_hourly.approved + excluded.approved,
  declined = statistics_hourly.declined + excluded.declined,
  no_score = statistics_hourly.no_score + excluded.no_score,
  filtered = statistics_hourly.filtered + excluded.filtered;

insert into turnaround_hourly (hour, bin, requests)
select date_bin(interval '1 hour', r.submitted_at, timestamptz '2000-01-01 00:00:00+00'), least($1, floor($2 * ln(greatest((date_part('epoch', "r"."completed_at" - "r"."submitted_at") * 1000), 1)) / ln(2)))::smallint, count(*)
  from underwriting_requests r
 where r.id = any ($3::bigint[]) and r.status = 'completed' and r.completed_at is not null
 group by 1, 2
 order by 1, 2
on conflict (hour, bin) do update set requests = turnaround_hourly.requests + excluded.requests;

with k as (delete from idempotency_keys where request_id = any ($1::bigint[]) returning 1),
     c as (delete from callbacks where request_id = any ($2::bigint[]) returning id),
     e_request as (delete from events where request_id = any ($3::bigint[]) returning id),
     -- Another request's event naming one of these callbacks (none is written so today).
     e_callback as (
       delete from events where callback_id = any (array(select id from c))
          and (request_id is null or request_id <> all ($4::bigint[]))
       returning id),
     d as (delete from event_deliveries
            where event_id = any (array(select id from e_request union all select id from e_callback)) returning 1),
     r as (delete from underwriting_requests where id = any ($5::bigint[]) returning 1)
select (select count(*) from r)::int as underwriting_requests,
       (select count(*) from c)::int as callbacks,
       (select count(*) from k)::int as idempotency_keys,
       ((select count(*) from e_request) + (select count(*) from e_callback))::int as events,
       (select count(*) from d)::int as event_deliveries,
       0 as campaigns;
