import { type Kysely, sql } from 'kysely';
import { strayCallbacksIn } from '../aggregates/sql.js';
import { ORIGIN, turnaroundBin } from '../aggregates/turnaround.js';
import { INDEX_SCANS_ONLY, RANGES_BY_BITMAP } from '../db/plan-guards.js';
import type { SqlSnapshot } from '../db/statements.js';
import type { Tables } from '../db/types.js';
import { unwrittenByUrlSql, unwrittenDeliveriesSql } from '../events/pending-sql.js';

export type BucketUnit = 'hour' | 'day';

/** Fixed lengths (a "day" is 24 h of UTC), so no session time zone or DST can bend a bucket. */
export const BUCKET_MS: Record<BucketUnit, number> = { hour: 3600_000, day: 24 * 3600_000 };
const WIDTH: Record<BucketUnit, string> = { hour: '1 hour', day: '24 hours' };

export interface BucketRow {
  start: Date;
  submitted: number;
  completed: number;
  expired: number;
  submit_failed: number;
  pending: number;
  approved: number;
  declined: number;
  no_score: number;
  filtered: number;
  unmatched: number;
  invalid: number;
  /** Turnaround bins (see aggregates/turnaround.ts) holding the 50th and 95th percentiles; null without a completed request. */
  p50_bin: number | null;
  p95_bin: number | null;
}

const COUNTS = ['submitted', 'completed', 'expired', 'submit_failed', 'pending', 'approved', 'declined', 'no_score', 'filtered', 'unmatched', 'invalid'] as const;

/**
 * Every bucket in [since, until) (both on bucket boundaries), in order, empty ones included, in one
 * round trip. A bucket's requests are those submitted in it, as they stand now; its unmatched and
 * invalid callbacks those that arrived in it. An hour is counted in statistics_hourly and
 * turnaround_hourly (its purged rows; once closed, all of them; while open, those submitted before
 * its watermark folded_until but for the listed ones: aggregates/closing.ts) plus, while it is not
 * closed, its live rows from the watermark on, read by range through the submitted_at index for
 * each run of open hours, the listed rows below it by id (statistics_unfolded, by hour), and its
 * stray callbacks from theirs on by range through callbacks_stray: a counted row is never read, so the read costs the
 * window's hours, its open hours' last minutes and what of them still awaits the provider, not the
 * window's rows. Percentiles come from the merged turnaround histogram.
 */
export function bucketsQuery(since: Date, until: Date, unit: BucketUnit) {
  const width = sql`${WIDTH[unit]}::interval`;
  const bucket = (column: ReturnType<typeof sql.ref>) => sql`date_bin(${width}, ${column}, ${ORIGIN})`;
  const sum = (c: string) => sql`sum(${sql.ref(c)})::bigint as ${sql.ref(c)}`;
  // One group of rows (aliased x) per bucket and turnaround bin.
  const requestCounts = sql`
          select ${bucket(sql.ref('x.submitted_at'))} as start,
                 case when x.status = 'completed' and x.completed_at is not null then ${turnaroundBin('x')} end as bin,
                 count(*) as submitted,
                 count(*) filter (where x.status = 'completed') as completed,
                 count(*) filter (where x.status = 'expired') as expired,
                 count(*) filter (where x.status = 'submit_failed') as submit_failed,
                 -- Awaiting the provider: queued (Prefer: respond-async, campaigns) too.
                 count(*) filter (where x.status in ('queued', 'submitting', 'submitted')) as pending,
                 count(*) filter (where x.decision = 'approved') as approved,
                 count(*) filter (where x.decision = 'declined') as declined,
                 count(*) filter (where x.decision = 'no_score') as no_score,
                 count(*) filter (where x.decision = 'filtered') as filtered`;
  return sql<BucketRow>`
    with agg as materialized (
      select s.hour, s.closed_at, s.folded_until, s.stray_folded_until, ${sql.join(COUNTS.filter((c) => c !== 'pending').map((c) => sql.ref(`s.${c}`)))}
        from statistics_hourly s
       where s.hour >= ${since} and s.hour < ${until}
    ),
    hours as (
      -- Each open hour with where its unread requests and stray callbacks begin: their watermark, or its start.
      select h.hour, coalesce(a.folded_until, h.hour) as lo, coalesce(a.stray_folded_until, h.hour) as stray_lo
        from generate_series(${since}::timestamptz, ${until}::timestamptz - interval '1 hour', interval '1 hour') as h(hour)
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
        cross join lateral (${requestCounts}
            from underwriting_requests x
           where x.submitted_at >= o.lo and x.submitted_at < o.hi
           group by 1, 2) r
      union all
      -- The listed rows below their open hour's watermark, by id (a listed row that has moved is
      -- above its new hour's watermark: the range has it).
      ${requestCounts}
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
       where a.closed_at is null and u.hour >= ${since} and u.hour < ${until}
         and date_bin('1 hour', x.submitted_at, ${ORIGIN}) = a.hour and x.submitted_at < a.folded_until
       group by 1, 2
    ),
    counts as (
      select start, submitted, completed, expired, submit_failed, pending,
             approved, declined, no_score, filtered, 0 as unmatched, 0 as invalid
        from live
      union all
      select ${bucket(sql.ref('s.hour'))}, s.submitted, s.completed, s.expired, s.submit_failed, 0,
             s.approved, s.declined, s.no_score, s.filtered, s.unmatched, s.invalid
        from agg s
      union all
      select c.start, 0, 0, 0, 0, 0, 0, 0, 0, 0, c.unmatched, c.invalid
        from stray_runs o
        cross join lateral (
          -- One range of callbacks_stray per outcome (strayCallbacksIn).
          select ${bucket(sql.ref('c.received_at'))} as start,
                 count(*) filter (where c.outcome = 'unmatched') as unmatched,
                 count(*) filter (where c.outcome = 'invalid') as invalid
            from ${strayCallbacksIn(sql.ref('o.lo'), sql.ref('o.hi'))}
           group by 1) c
    ),
    totals as (
      select start, ${sql.join(COUNTS.map(sum))} from counts group by start
    ),
    bins as (
      select start, bin, completed as n from live where bin is not null
      union all
      select ${bucket(sql.ref('t.hour'))}, t.bin, t.requests
        from turnaround_hourly t
       where t.hour >= ${since} and t.hour < ${until}
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
    select g.start, ${sql.join(COUNTS.map((c) => sql`coalesce(t.${sql.ref(c)}, 0)::bigint as ${sql.ref(c)}`))},
           p.p50_bin::int as p50_bin, p.p95_bin::int as p95_bin
      from generate_series(${since}::timestamptz, ${until}::timestamptz - ${width}, ${width}) as g(start)
      left join totals t on t.start = g.start
      left join percentiles p on p.start = g.start
     order by g.start`;
}

/** How the buckets are read (db/plan-guards.ts): ranges by bitmap, nothing sequentially. */
export const BUCKETS_READ_PLANS = RANGES_BY_BITMAP;

/**
 * The buckets in a transaction of their own with no sequential scan and no plain index scan:
 * whatever the statistics say (none yet, or from when the tables were small), every live row is
 * read by its range, by bitmap, and every aggregate row by its hour (docs/performance.md).
 */
export async function readBuckets(db: Kysely<Tables>, since: Date, until: Date, unit: BucketUnit): Promise<BucketRow[]> {
  return db.transaction().execute(async (trx) => {
    await BUCKETS_READ_PLANS.execute(trx);
    const { rows } = await bucketsQuery(since, until, unit).execute(trx);
    return rows;
  });
}

export interface PresentRow {
  pending: number;
  oldest_pending: Date | null;
  oldest_submitted: Date | null;
  unmatched: number;
  invalid: number;
  deliveries_pending: number;
  oldest_delivery_pending: Date | null;
  deliveries_dead: number;
  /** Of deliveries_dead, those whose endpoint still exists (the rest were written off by deleting theirs). */
  deliveries_dead_kept: number;
}

/**
 * The present: what awaits the provider, queued, being sent or awaiting its callback (through the one-in-flight index), stray callbacks since
 * dayAgo (callbacks_stray), and event deliveries pending and dead (each through its partial index); of the dead, those whose
 * endpoint still exists, counted per endpoint row through event_deliveries_endpoint (url_key, status, ...): a deleted
 * endpoint's dead deliveries (its backlog ended endpoint_deleted, or what died before) can no longer be redelivered.
 */
export function presentQuery(dayAgo: Date, keys: readonly string[] = []) {
  return sql<PresentRow>`
    select p.pending, p.oldest_pending,
           -- What the expiry sweep ends: a queued request is not waiting for a callback, and never expires.
           (select min(r.submitted_at) from underwriting_requests r where r.status = 'submitted') as oldest_submitted,
           (select count(*) from callbacks c
             where c.outcome = 'unmatched' and c.received_at >= ${dayAgo})::bigint as unmatched,
           (select count(*) from callbacks c
             where c.outcome = 'invalid' and c.received_at >= ${dayAgo})::bigint as invalid,
           d.deliveries_pending + u.n as deliveries_pending, least(d.oldest_delivery_pending, u.oldest) as oldest_delivery_pending,
           (select count(*) from event_deliveries x where x.status = 'dead')::bigint as deliveries_dead,
           (select coalesce(sum(k.n), 0) from event_endpoints ep
              cross join lateral (select count(*) as n from event_deliveries x where x.url_key = ep.key and x.status = 'dead') k)::bigint
             as deliveries_dead_kept
      from (select count(*)::bigint as pending, min(r.submitted_at) as oldest_pending
              from underwriting_requests r
             -- The one-in-flight index's own predicate: queued requests await the provider too
             -- (their submitted_at is when they were queued).
             where r.status in ('queued', 'submitting', 'submitted')) p,
           (select count(*)::bigint as deliveries_pending, min(x.queued_at) as oldest_delivery_pending
              from event_deliveries x
             where x.status = 'pending') d,
           (${unwrittenDeliveriesSql(keys)}) u`;
}

/**
 * The present in a transaction of its own with index scans only: each count through its partial
 * index whatever the statistics, skipping the dead versions an earlier read found (INDEX_SCANS_ONLY).
 */
export async function readPresent(db: Kysely<Tables>, dayAgo: Date, keys: readonly string[] = []): Promise<PresentRow> {
  return db.transaction().execute(async (trx) => {
    await INDEX_SCANS_ONLY.execute(trx);
    const { rows } = await presentQuery(dayAgo, keys).execute(trx);
    return rows[0]!;
  });
}

export interface UrlDeliveriesRow {
  /** As stored: no userinfo, query values redacted. */
  url: string;
  status: 'pending' | 'dead';
  n: number;
}

/**
 * Pending and dead deliveries per URL (each status through its partial index), counting as pending
 * the configured targets' deliveries not written yet, as presentQuery does.
 */
export function deliveriesByUrlQuery(keys: readonly string[] = []) {
  return sql<UrlDeliveriesRow>`
    select url, status, count(*)::bigint as n from (
      select d.url, 'pending' as status from event_deliveries d where d.status = 'pending'
      union all
      select d.url, 'dead' as status from event_deliveries d where d.status = 'dead'
      union all
      ${unwrittenByUrlSql(keys)}
    ) x
     group by url, status
     order by url, status`;
}

export async function readDeliveriesByUrl(db: Kysely<Tables>, keys: readonly string[] = []): Promise<UrlDeliveriesRow[]> {
  const { rows } = await deliveriesByUrlQuery(keys).execute(db);
  return rows.map((r) => ({ ...r, n: Number(r.n) }));
}

/** The console's queries as `npm run sql:snapshot` writes them (docs/layout.md). */
export const SQL_SNAPSHOTS: readonly SqlSnapshot[] = [
  { name: 'read_buckets_hour', run: (db) => readBuckets(db, new Date(0), new Date(86_400_000), 'hour') },
  { name: 'read_buckets_day', run: (db) => readBuckets(db, new Date(0), new Date(7 * 86_400_000), 'day') },
  { name: 'read_present', rows: [[], [{}]], run: (db) => readPresent(db, new Date(0), ['k']) },
  { name: 'read_deliveries_by_url', run: (db) => readDeliveriesByUrl(db, ['k']) },
];
