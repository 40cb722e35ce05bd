import type { FastifyBaseLogger } from 'fastify';
import { type Kysely, type RawBuilder, sql } from 'kysely';
import { SHARE_CLOSING_LOCK } from '../aggregates/sql.js';
import { foldRequests, foldStrayCallbacks, idArray } from '../aggregates/fold.js';
import type { SqlSnapshot } from '../db/statements.js';
import type { Tables } from '../db/types.js';
import { INDEX_LOOKUPS_ONLY } from '../db/plan-guards.js';
import { type Periodic, startPeriodic } from '../timing/periodic.js';

/** Tables the sweep deletes from, as the purged-rows metric labels them. */
export const PURGED_TABLES = ['underwriting_requests', 'callbacks', 'idempotency_keys', 'events', 'event_deliveries', 'campaigns'] as const;
export type PurgedTable = (typeof PURGED_TABLES)[number];
export type Purged = Record<PurgedTable, number>;

export interface PurgeLimits {
  /** Rows locked, folded and deleted per transaction. */
  batch: number;
  /** Batches of each kind per pass: what one pass of one instance may do, however large the backlog. */
  maxBatches: number;
}

export const DEFAULT_LIMITS: PurgeLimits = { batch: 500, maxBatches: 20 };

/** How often each instance runs a pass. */
export const RETENTION_INTERVAL_MS = 60_000;

const none = (): Purged => ({ underwriting_requests: 0, callbacks: 0, idempotency_keys: 0, events: 0, event_deliveries: 0, campaigns: 0 });

function add(total: Purged, more: Purged): void {
  for (const table of PURGED_TABLES) total[table] += more[table];
}

export function retentionCutoff(now: Date, retentionDays: number): Date {
  return new Date(now.getTime() - retentionDays * 24 * 3600 * 1000);
}

/** Locks the oldest batch of requests past the cutoff, through the submitted_at index; rows others hold are skipped. */
export function requestBatchQuery(cutoff: Date, batch: number) {
  return sql<{ id: number }>`
    select r.id from underwriting_requests r
     where r.submitted_at < ${cutoff} and r.updated_at < ${cutoff}
       and r.status not in ('queued', 'submitting', 'submitted')
     order by r.submitted_at
     limit ${batch}
     for update skip locked`;
}

/** Locks a batch of unmatched and invalid callbacks that arrived before the cutoff, through callbacks_stray. */
export function strayBatchQuery(cutoff: Date, batch: number) {
  return sql<{ id: number }>`
    select c.id from callbacks c
     where c.outcome in ('unmatched', 'invalid') and c.received_at < ${cutoff}
     limit ${batch}
     for update skip locked`;
}


/** One kind of batch: how its rows are locked, folded into the aggregates and deleted. */
interface BatchKind {
  lock(cutoff: Date, batch: number): RawBuilder<{ id: number }>;
  fold(trx: Kysely<Tables>, ids: string): Promise<void>;
  /** Deletes the rows `ids` (a PostgreSQL array literal) and what hangs on them, counted by table. */
  remove(ids: string): RawBuilder<Purged>;
  /** How many of the kind's own rows a batch took (a short batch: nothing more is free now). */
  taken(purged: Purged): number;
}

/**
 * Requests whose last change is before the cutoff, with their callbacks, idempotency keys, events
 * and event deliveries. A request still awaiting the provider is never purged (the expiry sweep
 * settles it first). Found by submitted_at (indexed, never updated): a request changed before the
 * cutoff was submitted before it too.
 */
const REQUESTS: BatchKind = {
  lock: requestBatchQuery,
  fold: foldRequests,
  remove: (ids) => removeRequestsQuery(ids),
  taken: (purged) => purged.underwriting_requests,
};

/**
 * Deletes the requests `ids` and what hangs on them, in one statement: requests and their callbacks
 * refer to each other, and nothing cascades from a request to its events (migration 0027), so each
 * dependant is deleted here, and counted. Every delete is one index lookup per key (an
 * `= any (array)`), never a scan: an `or` of two keys, or an `in (select ...)`, left the planner
 * no index or a hash join over the whole table (docs/performance.md).
 */
export function removeRequestsQuery(ids: string) {
  return sql<Purged>`
      with k as (delete from idempotency_keys where request_id = any (${ids}::bigint[]) returning 1),
           c as (delete from callbacks where request_id = any (${ids}::bigint[]) returning id),
           e_request as (delete from events where request_id = any (${ids}::bigint[]) returning id),
           -- Another request's event naming one of these callbacks (none is written so today).
           e_callback as (
             delete from events where callback_id = any (array(select id from c))
                and (request_id is null or request_id <> all (${ids}::bigint[]))
             returning id),
           d as (delete from event_deliveries
                  where event_id = any (array(select id from e_request union all select id from e_callback)) returning 1),
           r as (delete from underwriting_requests where id = any (${ids}::bigint[]) returning 1)
      select (select count(*) from r)::int as underwriting_requests,
             (select count(*) from c)::int as callbacks,
             (select count(*) from k)::int as idempotency_keys,
             ((select count(*) from e_request) + (select count(*) from e_callback))::int as events,
             (select count(*) from d)::int as event_deliveries,
             0 as campaigns`;
}

/** Unmatched and invalid callbacks that arrived before the cutoff, with their events. */
const STRAY_CALLBACKS: BatchKind = {
  lock: strayBatchQuery,
  fold: foldStrayCallbacks,
  remove: (ids) => sql<Purged>`
      with e as (delete from events where callback_id = any (${ids}::bigint[]) returning id),
           d as (delete from event_deliveries where event_id = any (array(select id from e)) returning 1),
           c as (delete from callbacks where id = any (${ids}::bigint[]) returning 1)
      select 0 as underwriting_requests, (select count(*) from c)::int as callbacks, 0 as idempotency_keys,
             (select count(*) from e)::int as events, (select count(*) from d)::int as event_deliveries, 0 as campaigns`,
  taken: (purged) => purged.callbacks,
};

/**
 * Campaigns past the cutoff whose requests are all gone (purged, or erased): a campaign holds no
 * personal data, but nothing is kept past retention. Each probe for a request is one lookup in
 * underwriting_requests_campaign.
 */
const CAMPAIGNS: BatchKind = {
  lock: (cutoff, batch) => sql<{ id: number }>`
    select c.id from campaigns c
     where c.created_at < ${cutoff} and c.updated_at < ${cutoff}
       and not exists (select 1 from underwriting_requests r where r.campaign_id = c.id)
     limit ${batch}
     for update skip locked`,
  fold: async () => {},
  remove: (ids) => sql<Purged>`
      with c as (delete from campaigns where id = any (${ids}::bigint[]) returning 1)
      select 0 as underwriting_requests, 0 as callbacks, 0 as idempotency_keys, 0 as events, 0 as event_deliveries,
             (select count(*) from c)::int as campaigns`,
  taken: (purged) => purged.campaigns,
};

/**
 * One batch of a kind, in one transaction: locked (rows another sweep holds are skipped), folded
 * into the hourly statistics, deleted.
 */
async function purgeBatch(db: Kysely<Tables>, kind: BatchKind, cutoff: Date, batch: number): Promise<Purged> {
  return db.transaction().execute(async (trx) => {
    // Every delete an index lookup, whatever the statistics guess (docs/performance.md).
    await INDEX_LOOKUPS_ONLY.execute(trx);
    // Before the fold: a closing of one of these hours waits for this batch, or this batch for it
    // (aggregates/closing.ts; the delete takes a closed hour's rows back out of its counts).
    await SHARE_CLOSING_LOCK.execute(trx);
    const { rows } = await kind.lock(cutoff, batch).execute(trx);
    if (rows.length === 0) return none();
    const ids = idArray(rows.map((r) => r.id));
    await kind.fold(trx, ids);
    const { rows: deleted } = await kind.remove(ids).execute(trx);
    return deleted[0] ?? none();
  });
}

/** One batch of requests past the cutoff with everything that hangs on them (see REQUESTS). */
export function purgeRequestBatch(db: Kysely<Tables>, cutoff: Date, batch: number): Promise<Purged> {
  return purgeBatch(db, REQUESTS, cutoff, batch);
}

/**
 * One pass: batches until nothing is left before the cutoff or maxBatches of each kind are done.
 * Safe with any number of instances at once: each batch takes only rows nobody else holds.
 */
export async function purgePass(db: Kysely<Tables>, now: Date, retentionDays: number, limits = DEFAULT_LIMITS): Promise<Purged> {
  const cutoff = retentionCutoff(now, retentionDays);
  const total = none();
  for (const kind of [REQUESTS, STRAY_CALLBACKS, CAMPAIGNS]) {
    for (let i = 0; i < limits.maxBatches; i++) {
      const purged = await purgeBatch(db, kind, cutoff, limits.batch);
      add(total, purged);
      // A short batch: nothing more is free to take now (the rest, if any, another sweep holds).
      if (kind.taken(purged) < limits.batch) break;
    }
  }
  return total;
}

export interface RetentionDeps {
  db: Kysely<Tables>;
  clock: () => Date;
  retentionDays: number;
  log: FastifyBaseLogger;
  onPurged(purged: Purged): void;
  limits?: PurgeLimits;
  intervalMs?: number;
}

export type RetentionSweep = Periodic;

/** The periodic retention sweep of one instance; every instance runs one. */
export function startRetentionSweep(deps: RetentionDeps): RetentionSweep {
  return startPeriodic('retention sweep', deps.intervalMs ?? RETENTION_INTERVAL_MS, deps.log, async () => {
    const purged = await purgePass(deps.db, deps.clock(), deps.retentionDays, deps.limits);
    deps.onPurged(purged);
    if (purged.underwriting_requests + purged.callbacks > 0) {
      deps.log.info({ purged, retentionDays: deps.retentionDays }, 'purged rows past retention');
    }
  });
}

/** One batch of each kind, its whole transaction, as `npm run sql:snapshot` writes it (docs/layout.md). */
export const SQL_SNAPSHOTS: readonly SqlSnapshot[] = [
  { name: 'purge_request_batch', rows: [[], [], [{ id: 1 }]], run: (db) => purgeRequestBatch(db, new Date(0), DEFAULT_LIMITS.batch) },
  { name: 'purge_stray_callback_batch', rows: [[], [], [{ id: 1 }]], run: (db) => purgeBatch(db, STRAY_CALLBACKS, new Date(0), DEFAULT_LIMITS.batch) },
  { name: 'purge_campaign_batch', rows: [[], [], [{ id: 1 }]], run: (db) => purgeBatch(db, CAMPAIGNS, new Date(0), DEFAULT_LIMITS.batch) },
];
