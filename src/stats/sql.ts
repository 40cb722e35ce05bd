import { type Kysely, sql } from 'kysely';
import { ORIGIN, turnaroundBin } from '../aggregates/turnaround.js';
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
 * invalid callbacks those that arrived in it. Live rows are read through the submitted_at and
 * received_at indexes; purged hours come from the aggregates (a row is in one or the other, never
 * both). Percentiles come from the merged turnaround histogram of both.
 */
export function bucketsQuery(since: Date, until: Date, unit: BucketUnit) {
  const width = sql`${WIDTH[unit]}::interval`;
  const bucket = (column: ReturnType<typeof sql.ref>) => sql`date_bin(${width}, ${column}, ${ORIGIN})`;
  const sum = (c: string) => sql`sum(${sql.ref(c)})::bigint as ${sql.ref(c)}`;
  return sql<BucketRow>`
    with live as (
      select ${bucket(sql.ref('r.submitted_at'))} as start,
             case when r.status = 'completed' and r.completed_at is not null then ${turnaroundBin('r')} end as bin,
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
       where r.submitted_at >= ${since} and r.submitted_at < ${until}
       group by 1, 2
    ),
    counts as (
      select start, submitted, completed, expired, submit_failed, pending,
             approved, declined, no_score, filtered, unmatched, invalid
        from live
      union all
      select ${bucket(sql.ref('s.hour'))}, s.submitted, s.completed, s.expired, s.submit_failed, 0,
             s.approved, s.declined, s.no_score, s.filtered, s.unmatched, s.invalid
        from statistics_hourly s
       where s.hour >= ${since} and s.hour < ${until}
      union all
      select ${bucket(sql.ref('c.received_at'))}, 0, 0, 0, 0, 0, 0, 0, 0, 0,
             (c.outcome = 'unmatched')::int, (c.outcome = 'invalid')::int
        from callbacks c
       where c.outcome in ('unmatched', 'invalid') and c.received_at >= ${since} and c.received_at < ${until}
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
    select g.start, ${sql.join(COUNTS.map((c) => sql`coalesce(t.${sql.ref(c)}, 0)::bigint as ${sql.ref(c)}`))},
           p.p50_bin::int as p50_bin, p.p95_bin::int as p95_bin
      from generate_series(${since}::timestamptz, ${until}::timestamptz - ${width}, ${width}) as g(start)
      left join totals t on t.start = g.start
      left join percentiles p on p.start = g.start
     order by g.start`;
}

export async function readBuckets(db: Kysely<Tables>, since: Date, until: Date, unit: BucketUnit): Promise<BucketRow[]> {
  const { rows } = await bucketsQuery(since, until, unit).execute(db);
  return rows;
}

export interface PresentRow {
  pending: number;
  oldest_pending: Date | null;
  unmatched: number;
  invalid: number;
  deliveries_pending: number;
  oldest_delivery_pending: Date | null;
  deliveries_dead: number;
}

/**
 * The present: what awaits the provider, queued, being sent or awaiting its callback (through the one-in-flight index), stray callbacks since
 * dayAgo (callbacks_stray), and event deliveries pending and dead (each through its partial index).
 */
export function presentQuery(dayAgo: Date, keys: readonly string[] = []) {
  return sql<PresentRow>`
    select p.pending, p.oldest_pending,
           (select count(*) from callbacks c
             where c.outcome = 'unmatched' and c.received_at >= ${dayAgo})::bigint as unmatched,
           (select count(*) from callbacks c
             where c.outcome = 'invalid' and c.received_at >= ${dayAgo})::bigint as invalid,
           d.deliveries_pending + u.n as deliveries_pending, least(d.oldest_delivery_pending, u.oldest) as oldest_delivery_pending,
           (select count(*) from event_deliveries x where x.status = 'dead')::bigint as deliveries_dead
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

export async function readPresent(db: Kysely<Tables>, dayAgo: Date, keys: readonly string[] = []): Promise<PresentRow> {
  const { rows } = await presentQuery(dayAgo, keys).execute(db);
  return rows[0]!;
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
  { name: 'read_present', rows: [[{}]], run: (db) => readPresent(db, new Date(0), ['k']) },
  { name: 'read_deliveries_by_url', run: (db) => readDeliveriesByUrl(db, ['k']) },
];
