-- Query close_hour (builder), in src/aggregates/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

select set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true);

select pg_advisory_xact_lock(4127708853940019163);

with b as (
  select coalesce(s.folded_until, s.hour) as lo, coalesce(s.stray_folded_until, s.hour) as stray_lo
    from statistics_hourly s where s.hour = $1
),
live as (
  select
  count(*) as submitted,
  count(*) filter (where x.status = 'completed') as completed,
  count(*) filter (where x.status = 'expired') as expired,
  count(*) filter (where x.status = 'submit_failed') as submit_failed,
  count(*) filter (where x.decision = 'approved') as approved,
  count(*) filter (where x.decision = 'declined') as declined,
  count(*) filter (where x.decision = 'no_score') as no_score,
  count(*) filter (where x.decision = 'filtered') as filtered,
         count(*) filter (where x.status in ('queued', 'submitting', 'submitted')) as awaiting
    from b cross join lateral (
      select x.status, x.decision from underwriting_requests x
       where x.submitted_at >= b.lo and x.submitted_at < $2) x
),
stray as (
  select count(*) filter (where c.outcome = 'unmatched') as unmatched,
         count(*) filter (where c.outcome = 'invalid') as invalid
    from b cross join lateral (
      select c.outcome from unnest(array['unmatched', 'invalid']) as k(outcome)
        join callbacks c on c.outcome = k.outcome
       where c.outcome in ('unmatched', 'invalid') and c.received_at >= "b"."stray_lo" and c.received_at < $3
      offset 0) c
)
update statistics_hourly s
   set
  submitted = s.submitted + l.submitted, completed = s.completed + l.completed,
  expired = s.expired + l.expired, submit_failed = s.submit_failed + l.submit_failed,
  approved = s.approved + l.approved, declined = s.declined + l.declined,
  no_score = s.no_score + l.no_score, filtered = s.filtered + l.filtered,
       unmatched = s.unmatched + c.unmatched, invalid = s.invalid + c.invalid,
       -- A closed hour counts all its rows: no watermark (and migration 0028's guard lets
       -- only a close that clears them close a folded hour).
       closed_at = $4, folded_until = null, stray_folded_until = null
  from live l, stray c, b
 where s.hour = $5 and s.closed_at is null and l.awaiting = 0
   and not exists (select 1 from statistics_unfolded u where u.hour = $6)
   -- Through underwriting_requests_status_list: the few requests being sent. Only the hour a
   -- request was queued in: the hours after it stay closable while a long campaign is sent.
   and not exists (select 1 from underwriting_requests q
                    where q.status = 'submitting' and q.queued_at >= $7 and q.queued_at < $8)
returning s.hour, b.lo;

insert into turnaround_hourly as t (hour, bin, requests)
select $1::timestamptz, least($2, floor($3 * ln(greatest((date_part('epoch', "r"."completed_at" - "r"."submitted_at") * 1000), 1)) / ln(2)))::smallint, count(*)
  from underwriting_requests r
 where r.submitted_at >= $4 and r.submitted_at < $5 and r.status = 'completed' and r.completed_at is not null
 group by 2
 order by 2
on conflict (hour, bin) do update set requests = t.requests + excluded.requests;
