-- Query read_buckets_day (builder), in src/stats/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

select set_config('enable_seqscan', 'off', true), set_config('enable_indexscan', 'off', true), set_config('enable_indexonlyscan', 'off', true);

with agg as materialized (
  select s.hour, s.closed_at, s.folded_until, s.stray_folded_until, "s"."submitted", "s"."completed", "s"."expired", "s"."submit_failed", "s"."approved", "s"."declined", "s"."no_score", "s"."filtered", "s"."unmatched", "s"."invalid"
    from statistics_hourly s
   where s.hour >= $1 and s.hour < $2
),
hours as (
  -- Each open hour with where its unread requests and stray callbacks begin: their watermark, or its start.
  select h.hour, coalesce(a.folded_until, h.hour) as lo, coalesce(a.stray_folded_until, h.hour) as stray_lo
    from generate_series($3::timestamptz, $4::timestamptz - interval '1 hour', interval '1 hour') as h(hour)
    left join agg a on a.hour = h.hour
   where a.closed_at is null
),
runs as (
  -- Consecutive open hours as one range each, from the first one's watermark on: an hour with a
  -- watermark starts a range of its own (typically one or two ranges: the last minutes).
  select kind, min(lo) as lo, max(hour) + interval '1 hour' as hi
    from (select kind, hour, lo, hour - row_number() over (partition by kind order by hour) * interval '1 hour' as run,
                 count(*) filter (where lo > hour) over (partition by kind order by hour) as folds
            from (select 'requests' as kind, hour, lo from hours union all select 'stray', hour, stray_lo from hours) k) x
   group by kind, run, folds
  -- An hour folded to its end has nothing left to read.
  having min(lo) < max(hour) + interval '1 hour'
),
request_runs as (
  select lo, hi from runs where kind = 'requests'
),
stray_runs as (
  select lo, hi from runs where kind = 'stray'
),
live as (
  -- Lateral and grouped per run: each run one range of underwriting_requests_list, never a
  -- join the planner could turn into a pass over every row.
  select r.start, r.bin, r.submitted, r.completed, r.expired, r.submit_failed, r.pending,
         r.approved, r.declined, r.no_score, r.filtered
    from request_runs o
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
  union all
  -- The listed rows below their open hour's watermark, by id (a listed row that has moved is
  -- above its new hour's watermark: the range has it).

      select date_bin($8::interval, "x"."submitted_at", timestamptz '2000-01-01 00:00:00+00') as start,
             case when x.status = 'completed' and x.completed_at is not null then least($9, floor($10 * ln(greatest((date_part('epoch', "x"."completed_at" - "x"."submitted_at") * 1000), 1)) / ln(2)))::smallint end as bin,
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
    from agg a
    join statistics_unfolded u on u.hour = a.hour
    -- Each entry's request looked up by its id, lateral (offset 0 keeps it a subquery): joined
    -- plainly, analysed statistics had the planner read underwriting_requests first, every row
    -- below the watermark (x.submitted_at < a.folded_until), to find the few listed.
    cross join lateral (
      select r.submitted_at, r.status, r.decision, r.completed_at
        from underwriting_requests r
       where r.id = u.request_id
      offset 0) x
   -- An entry's hour is its request's while the request is below that hour's watermark: the
   -- equality keeps each open hour's entries one range of statistics_unfolded_hour.
   where a.closed_at is null and u.hour >= $11 and u.hour < $12
     and date_bin('1 hour', x.submitted_at, timestamptz '2000-01-01 00:00:00+00') = a.hour and x.submitted_at < a.folded_until
   group by 1, 2
),
counts as (
  select start, submitted, completed, expired, submit_failed, pending,
         approved, declined, no_score, filtered, 0 as unmatched, 0 as invalid
    from live
  union all
  select date_bin($13::interval, "s"."hour", timestamptz '2000-01-01 00:00:00+00'), s.submitted, s.completed, s.expired, s.submit_failed, 0,
         s.approved, s.declined, s.no_score, s.filtered, s.unmatched, s.invalid
    from agg s
  union all
  select c.start, 0, 0, 0, 0, 0, 0, 0, 0, 0, c.unmatched, c.invalid
    from stray_runs o
    cross join lateral (
      -- One range of callbacks_stray per outcome (strayCallbacksIn).
      select date_bin($14::interval, "c"."received_at", timestamptz '2000-01-01 00:00:00+00') as start,
             count(*) filter (where c.outcome = 'unmatched') as unmatched,
             count(*) filter (where c.outcome = 'invalid') as invalid
        from unnest(array['unmatched', 'invalid']) as k(outcome)
        join callbacks c on c.outcome = k.outcome
       where c.outcome in ('unmatched', 'invalid') and c.received_at >= "o"."lo" and c.received_at < "o"."hi"
       group by 1) c
),
totals as (
  select start, sum("submitted")::bigint as "submitted", sum("completed")::bigint as "completed", sum("expired")::bigint as "expired", sum("submit_failed")::bigint as "submit_failed", sum("pending")::bigint as "pending", sum("approved")::bigint as "approved", sum("declined")::bigint as "declined", sum("no_score")::bigint as "no_score", sum("filtered")::bigint as "filtered", sum("unmatched")::bigint as "unmatched", sum("invalid")::bigint as "invalid" from counts group by start
),
bins as (
  select start, bin, completed as n from live where bin is not null
  union all
  select date_bin($15::interval, "t"."hour", timestamptz '2000-01-01 00:00:00+00'), t.bin, t.requests
    from turnaround_hourly t
   where t.hour >= $16 and t.hour < $17
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
  from generate_series($18::timestamptz, $19::timestamptz - $20::interval, $21::interval) as g(start)
  left join totals t on t.start = g.start
  left join percentiles p on p.start = g.start
 order by g.start;
