-- Query read_buckets_hour (builder), in src/stats/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

set local enable_seqscan = off;

with agg as materialized (
  select s.hour, s.closed_at, "s"."submitted", "s"."completed", "s"."expired", "s"."submit_failed", "s"."approved", "s"."declined", "s"."no_score", "s"."filtered", "s"."unmatched", "s"."invalid"
    from statistics_hourly s
   where s.hour >= $1 and s.hour < $2
),
hours as (
  select h.hour from generate_series($3::timestamptz, $4::timestamptz - interval '1 hour', interval '1 hour') as h(hour)
   where not exists (select 1 from agg a where a.hour = h.hour and a.closed_at is not null)
),
open_runs as (
  -- Consecutive open hours as one range each (typically one: the last hour or two).
  select min(hour) as lo, max(hour) + interval '1 hour' as hi
    from (select hour, hour - row_number() over (order by hour) * interval '1 hour' as run from hours) x
   group by run
),
live as (
  -- Lateral and grouped per run: each run one range of underwriting_requests_list, never a
  -- join the planner could turn into a pass over every row.
  select r.start, r.bin, r.submitted, r.completed, r.expired, r.submit_failed, r.pending,
         r.approved, r.declined, r.no_score, r.filtered
    from open_runs o
    cross join lateral (
      select date_bin($5::interval, "x"."submitted_at", timestamptz '2000-01-01 00:00:00+00') as start,
             case when x.status = 'completed' and x.completed_at is not null then least($6, floor($7 * ln(greatest((date_part('epoch', "x"."completed_at" - "x"."submitted_at") * 1000), 1)) / ln(2)))::smallint end as bin,
             count(*) as submitted,
             count(*) filter (where x.status = 'completed') as completed,
             count(*) filter (where x.status = 'expired') as expired,
             count(*) filter (where x.status = 'submit_failed') as submit_failed,
             -- Awaiting the provider: queued (Prefer: respond-async, campaigns) too.
             count(*) filter (where x.status in ('queued', 'submitting', 'submitted')) as pending,
             count(*) filter (where x.decision = 'approved') as approved,
             count(*) filter (where x.decision = 'declined') as declined,
             count(*) filter (where x.decision = 'no_score') as no_score,
             count(*) filter (where x.decision = 'filtered') as filtered
        from underwriting_requests x
       where x.submitted_at >= o.lo and x.submitted_at < o.hi
       group by 1, 2) r
),
counts as (
  select start, submitted, completed, expired, submit_failed, pending,
         approved, declined, no_score, filtered, 0 as unmatched, 0 as invalid
    from live
  union all
  select date_bin($8::interval, "s"."hour", timestamptz '2000-01-01 00:00:00+00'), s.submitted, s.completed, s.expired, s.submit_failed, 0,
         s.approved, s.declined, s.no_score, s.filtered, s.unmatched, s.invalid
    from agg s
  union all
  select c.start, 0, 0, 0, 0, 0, 0, 0, 0, 0, c.unmatched, c.invalid
    from open_runs o
    cross join lateral (
      select date_bin($9::interval, "x"."received_at", timestamptz '2000-01-01 00:00:00+00') as start,
             count(*) filter (where x.outcome = 'unmatched') as unmatched,
             count(*) filter (where x.outcome = 'invalid') as invalid
        from callbacks x
       where x.outcome in ('unmatched', 'invalid') and x.received_at >= o.lo and x.received_at < o.hi
       group by 1) c
),
totals as (
  select start, sum("submitted")::bigint as "submitted", sum("completed")::bigint as "completed", sum("expired")::bigint as "expired", sum("submit_failed")::bigint as "submit_failed", sum("pending")::bigint as "pending", sum("approved")::bigint as "approved", sum("declined")::bigint as "declined", sum("no_score")::bigint as "no_score", sum("filtered")::bigint as "filtered", sum("unmatched")::bigint as "unmatched", sum("invalid")::bigint as "invalid" from counts group by start
),
bins as (
  select start, bin, completed as n from live where bin is not null
  union all
  select date_bin($10::interval, "t"."hour", timestamptz '2000-01-01 00:00:00+00'), t.bin, t.requests
    from turnaround_hourly t
   where t.hour >= $11 and t.hour < $12
),
merged as (
  -- A bin a late change or an erasure emptied holds 0: no turnaround of the bucket is in it.
  select start, bin, sum(n) as n from bins group by start, bin having sum(n) > 0
),
running as (
  select start, bin,
         sum(n) over (partition by start order by bin) as below,
         sum(n) over (partition by start) as total
    from merged
),
percentiles as (
  -- Nearest rank: the first bin holding the p-th of the bucket's turnarounds.
  select start,
         min(bin) filter (where below >= ceil(0.50 * total)) as p50_bin,
         min(bin) filter (where below >= ceil(0.95 * total)) as p95_bin
    from running group by start
)
select g.start, coalesce(t."submitted", 0)::bigint as "submitted", coalesce(t."completed", 0)::bigint as "completed", coalesce(t."expired", 0)::bigint as "expired", coalesce(t."submit_failed", 0)::bigint as "submit_failed", coalesce(t."pending", 0)::bigint as "pending", coalesce(t."approved", 0)::bigint as "approved", coalesce(t."declined", 0)::bigint as "declined", coalesce(t."no_score", 0)::bigint as "no_score", coalesce(t."filtered", 0)::bigint as "filtered", coalesce(t."unmatched", 0)::bigint as "unmatched", coalesce(t."invalid", 0)::bigint as "invalid",
       p.p50_bin::int as p50_bin, p.p95_bin::int as p95_bin
  from generate_series($13::timestamptz, $14::timestamptz - $15::interval, $16::interval) as g(start)
  left join totals t on t.start = g.start
  left join percentiles p on p.start = g.start
 order by g.start;
