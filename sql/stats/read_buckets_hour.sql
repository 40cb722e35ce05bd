-- Query read_buckets_hour (builder), in src/stats/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

with live as (
  select date_bin($1::interval, "r"."submitted_at", timestamptz '2000-01-01 00:00:00+00') as start,
         case when r.status = 'completed' and r.completed_at is not null then least($2, floor($3 * ln(greatest((date_part('epoch', "r"."completed_at" - "r"."submitted_at") * 1000), 1)) / ln(2)))::smallint end as bin,
         count(*) as submitted,
         count(*) filter (where r.status = 'completed') as completed,
         count(*) filter (where r.status = 'expired') as expired,
         count(*) filter (where r.status = 'submit_failed') as submit_failed,
         -- Awaiting the provider: queued (Prefer: respond-async, campaigns) too.
         count(*) filter (where r.status in ('queued', 'submitting', 'submitted')) as pending,
         count(*) filter (where r.decision = 'approved') as approved,
         count(*) filter (where r.decision = 'declined') as declined,
         count(*) filter (where r.decision = 'no_score') as no_score,
         count(*) filter (where r.decision = 'filtered') as filtered,
         0 as unmatched, 0 as invalid
    from underwriting_requests r
   where r.submitted_at >= $4 and r.submitted_at < $5
   group by 1, 2
),
counts as (
  select start, submitted, completed, expired, submit_failed, pending,
         approved, declined, no_score, filtered, unmatched, invalid
    from live
  union all
  select date_bin($6::interval, "s"."hour", timestamptz '2000-01-01 00:00:00+00'), s.submitted, s.completed, s.expired, s.submit_failed, 0,
         s.approved, s.declined, s.no_score, s.filtered, s.unmatched, s.invalid
    from statistics_hourly s
   where s.hour >= $7 and s.hour < $8
  union all
  select date_bin($9::interval, "c"."received_at", timestamptz '2000-01-01 00:00:00+00'), 0, 0, 0, 0, 0, 0, 0, 0, 0,
         (c.outcome = 'unmatched')::int, (c.outcome = 'invalid')::int
    from callbacks c
   where c.outcome in ('unmatched', 'invalid') and c.received_at >= $10 and c.received_at < $11
),
totals as (
  select start, sum("submitted")::bigint as "submitted", sum("completed")::bigint as "completed", sum("expired")::bigint as "expired", sum("submit_failed")::bigint as "submit_failed", sum("pending")::bigint as "pending", sum("approved")::bigint as "approved", sum("declined")::bigint as "declined", sum("no_score")::bigint as "no_score", sum("filtered")::bigint as "filtered", sum("unmatched")::bigint as "unmatched", sum("invalid")::bigint as "invalid" from counts group by start
),
bins as (
  select start, bin, completed as n from live where bin is not null
  union all
  select date_bin($12::interval, "t"."hour", timestamptz '2000-01-01 00:00:00+00'), t.bin, t.requests
    from turnaround_hourly t
   where t.hour >= $13 and t.hour < $14
),
merged as (
  select start, bin, sum(n) as n from bins group by start, bin
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
  from generate_series($15::timestamptz, $16::timestamptz - $17::interval, $18::interval) as g(start)
  left join totals t on t.start = g.start
  left join percentiles p on p.start = g.start
 order by g.start;
