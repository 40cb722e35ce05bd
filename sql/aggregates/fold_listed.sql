-- Query fold_listed (builder), in src/aggregates/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

set local enable_seqscan = off;

select pg_advisory_xact_lock(4127708853940019163);

with e as materialized (
  select u.request_id, s.hour, x.status, x.decision, x.submitted_at, x.completed_at,
         coalesce(s.closed_at is null and x.submitted_at < s.folded_until, false) as below
    from statistics_unfolded u
    left join underwriting_requests x on x.id = u.request_id
    left join statistics_hourly s on s.hour = date_bin('1 hour', x.submitted_at, timestamptz '2000-01-01 00:00:00+00')
),
counted as materialized (
  select * from e where e.below and e.status not in ('queued', 'submitting', 'submitted')
),
added as (
  update statistics_hourly s
     set
  submitted = s.submitted + l.submitted, completed = s.completed + l.completed,
  expired = s.expired + l.expired, submit_failed = s.submit_failed + l.submit_failed,
  approved = s.approved + l.approved, declined = s.declined + l.declined,
  no_score = s.no_score + l.no_score, filtered = s.filtered + l.filtered
    from (select x.hour,
  count(*) as submitted,
  count(*) filter (where x.status = 'completed') as completed,
  count(*) filter (where x.status = 'expired') as expired,
  count(*) filter (where x.status = 'submit_failed') as submit_failed,
  count(*) filter (where x.decision = 'approved') as approved,
  count(*) filter (where x.decision = 'declined') as declined,
  count(*) filter (where x.decision = 'no_score') as no_score,
  count(*) filter (where x.decision = 'filtered') as filtered from counted x group by x.hour) l
   where s.hour = l.hour
),
bins as (
  insert into turnaround_hourly as t (hour, bin, requests)
  select x.hour, least($1, floor($2 * ln(greatest((date_part('epoch', "x"."completed_at" - "x"."submitted_at") * 1000), 1)) / ln(2)))::smallint, count(*)
    from counted x
   where x.status = 'completed' and x.completed_at is not null
   group by 1, 2
   order by 1, 2
  on conflict (hour, bin) do update set requests = t.requests + excluded.requests
),
dropped as (
  delete from statistics_unfolded u using e
   where u.request_id = e.request_id and not (e.below and e.status in ('queued', 'submitting', 'submitted'))
)
select count(*)::text as folded from counted;
