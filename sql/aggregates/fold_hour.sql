-- Query fold_hour (builder), in src/aggregates/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

select set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true);

select pg_advisory_xact_lock(4127708853940019163);

with b as (
  select s.hour, coalesce(s.folded_until, s.hour) as lo,
         greatest(coalesce(s.folded_until, s.hour), least(s.hour + interval '1 hour', $1::timestamptz,
           (select min(q.submitted_at) from underwriting_requests q
             where q.status = 'queued' and q.submitted_at >= $2 and q.submitted_at < $3),
           -- Through underwriting_requests_status_list: the few requests being sent.
           (select min(q.queued_at) from underwriting_requests q
             where q.status = 'submitting' and q.queued_at >= $4 and q.queued_at < $5))) as hi,
         coalesce(s.stray_folded_until, s.hour) as stray_lo,
         greatest(coalesce(s.stray_folded_until, s.hour), least(s.hour + interval '1 hour', $6::timestamptz)) as stray_hi
    from statistics_hourly s
   where s.hour = $7 and s.closed_at is null
),
r as materialized (
  select x.id, x.status, x.decision, x.submitted_at, x.completed_at
    from b cross join lateral (
      select x.id, x.status, x.decision, x.submitted_at, x.completed_at from underwriting_requests x
       where x.submitted_at >= b.lo and x.submitted_at < b.hi) x
),
counted as materialized (
  select * from r where r.status not in ('queued', 'submitting', 'submitted')
),
stray as (
  -- Through callbacks_stray: each kind one range (strayCallbacksIn).
  select count(*) filter (where c.outcome = 'unmatched') as unmatched,
         count(*) filter (where c.outcome = 'invalid') as invalid
    from b cross join lateral (
      select c.outcome from unnest(array['unmatched', 'invalid']) as k(outcome)
        join callbacks c on c.outcome = k.outcome
       where c.outcome in ('unmatched', 'invalid') and c.received_at >= "b"."stray_lo" and c.received_at < "b"."stray_hi"
      offset 0) c
),
moved as (
  update statistics_hourly s
     set
  submitted = s.submitted + l.submitted, completed = s.completed + l.completed,
  expired = s.expired + l.expired, submit_failed = s.submit_failed + l.submit_failed,
  approved = s.approved + l.approved, declined = s.declined + l.declined,
  no_score = s.no_score + l.no_score, filtered = s.filtered + l.filtered, folded_until = b.hi,
         unmatched = s.unmatched + c.unmatched, invalid = s.invalid + c.invalid, stray_folded_until = b.stray_hi
    from b, (select
  count(*) as submitted,
  count(*) filter (where x.status = 'completed') as completed,
  count(*) filter (where x.status = 'expired') as expired,
  count(*) filter (where x.status = 'submit_failed') as submit_failed,
  count(*) filter (where x.decision = 'approved') as approved,
  count(*) filter (where x.decision = 'declined') as declined,
  count(*) filter (where x.decision = 'no_score') as no_score,
  count(*) filter (where x.decision = 'filtered') as filtered from counted x) l, stray c
   where s.hour = b.hour and (b.hi > b.lo or b.stray_hi > b.stray_lo)
  returning s.hour
),
bins as (
  insert into turnaround_hourly as t (hour, bin, requests)
  select $8::timestamptz, least($9, floor($10 * ln(greatest((date_part('epoch', "x"."completed_at" - "x"."submitted_at") * 1000), 1)) / ln(2)))::smallint, count(*)
    from counted x
   where x.status = 'completed' and x.completed_at is not null
   group by 2
   order by 2
  on conflict (hour, bin) do update set requests = t.requests + excluded.requests
),
listed as (
  insert into statistics_unfolded (request_id, hour)
  select r.id, $11::timestamptz from r where r.status in ('queued', 'submitting', 'submitted')
   order by r.id
  on conflict (request_id) do update set hour = excluded.hour
),
unlisted as (
  delete from statistics_unfolded u using counted c where u.request_id = c.id
)
select hour from moved;
