import type { Kysely } from 'kysely';
import { INDEX_SCANS_ONLY } from '../db/plan-guards.js';
import { runStatement } from '../db/run-statement.js';
import { defineStatement } from '../db/statements.js';
import type { SqlSnapshot } from '../db/statements.js';
import type { Link } from '@opentelemetry/api';
import type { SpanParent } from '../tracing/spans.js';
import type { Tables } from '../db/types.js';
import { EVENT_TYPE, requestEventsSql } from '../events/record.js';
import { answeredSlotsSql } from '../provider/sql.js';

/**
 * A submit calls the provider only within this long of starting to store its request; later (a
 * slow database, a slow token) it sends nothing. So a live submit's provider call has ended (or
 * timed out) by SEND_WINDOW_MS + UPSTREAM_TIMEOUT_MS after its request was stored.
 */
export const SEND_WINDOW_MS = 5_000;

/**
 * A request still `submitting` this long after its submit began, with no answer from the provider
 * recorded, was abandoned: its submit answered 503 although its row was committed, or its process
 * died mid-submit. Past any live submit (the send window, the upstream timeout, and as much again
 * for clocks and a slow commit). Its customer is released (see releaseAbandoned), its idempotency
 * key may be taken over.
 */
export const abandonedAfterMs = (upstreamTimeoutMs: number): number => upstreamTimeoutMs + 2 * SEND_WINDOW_MS;

/** What an abandoned request says in upstream_error; its fate at the provider is unknown at worst. */
export const ABANDONED_ERROR = 'abandoned: no answer from the provider was recorded in time (the submit stopped before or during the call)';

export interface NewSubmission {
  customerUuid: string;
  cpfHash: string;
  cpfMasked: string;
  costSavingEnabled: boolean;
  srd: Record<string, unknown> | undefined;
  idempotencyKey: string | undefined;
  now: Date;
  /** The submit's server span as W3C traceparent; null with tracing off. */
  traceparent: string | null;
  /** The submit's X-Request-Id. */
  xRequestId: string;
}

/** A stored submission: its row, or null when its customer already has a request in flight. */
export type StoredSubmission = { id: number; submittedAt: Date } | null;

// The two statements of every synchronous submit, each written for a batch of submits (the group
// commit of submissions/writes.ts: one statement and one commit for the submits that came while the
// last batch was written), written once and prepared. Neither reads a timestamp back: submitted_at
// is the `now` the insert was given.

/**
 * Stores each submission as `submitting`, unless its customer already has a request in flight
 * (underwriting_requests_one_in_flight: that one is not inserted, and the rest are). A batch holds
 * at most one submission per customer.
 */
export const INSERT_SUBMITTING = defineStatement('insert_submitting', `insert into underwriting_requests
     (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, srd, status, idempotency_key, submitted_at, updated_at,
      traceparent, x_request_id)
   select i.customer_uuid, i.cpf_hash, i.cpf_masked, i.cost_saving_enabled, i.srd, 'submitting', i.idempotency_key, i.at, i.at,
          i.traceparent, i.x_request_id
     from json_to_recordset($1::json) as i(
            n int, customer_uuid text, cpf_hash text, cpf_masked text, cost_saving_enabled boolean, srd jsonb,
            idempotency_key text, at timestamptz, traceparent text, x_request_id text)
    -- In one order whatever the batch (byte order, as JavaScript sorts): two instances' batches
    -- meeting on the same customers wait on each other's index entries instead of deadlocking.
    order by i.customer_uuid collate "C"
   on conflict (customer_uuid) where status in ('submitting', 'submitted') do nothing
   returning id, customer_uuid`);

/** The parameters of INSERT_SUBMITTING for a batch. */
export function insertSubmittingParameters(batch: readonly NewSubmission[]): unknown[] {
  const json = batch.map((s, n) => ({
    n,
    customer_uuid: s.customerUuid,
    cpf_hash: s.cpfHash,
    cpf_masked: s.cpfMasked,
    cost_saving_enabled: s.costSavingEnabled,
    srd: s.srd ?? null,
    idempotency_key: s.idempotencyKey ?? null,
    at: s.now.toISOString(),
    traceparent: s.traceparent,
    x_request_id: s.xRequestId,
  }));
  return [JSON.stringify(json)];
}

/** Commits each submission as `submitting`, in one statement; null for one whose customer has a request in flight. */
export async function insertSubmitting(db: Kysely<Tables>, batch: readonly NewSubmission[], parent?: SpanParent, links?: Link[]): Promise<StoredSubmission[]> {
  const rows = await runStatement<{ id: number; customer_uuid: string }>(db, INSERT_SUBMITTING, insertSubmittingParameters(batch), parent, links);
  const ids = new Map(rows.map((r) => [r.customer_uuid, Number(r.id)]));
  if (ids.size !== rows.length) throw new Error('a batch of submissions holds at most one per customer');
  return batch.map((s) => {
    const id = ids.get(s.customerUuid);
    return id === undefined ? null : { id, submittedAt: s.now };
  });
}

/** The provider's acceptance of a stored submission, and the call's slot when its return is this statement's. */
export interface Acceptance {
  id: number;
  upstreamStatus: number;
  now: Date;
  /** An answered call's provider slot (provider/pacing.ts, Permit.handOver): freed in the same commit. */
  slot: { slot: number; holder: string } | undefined;
}

/**
 * Records the provider's acceptance of each request, and gives back the slots their calls took (an
 * answer closes a circuit that failures opened), in one statement and one commit. A callback may have
 * overtaken a reply and completed its row already: only `submitting` moves on, nothing ever moves
 * back. The rows are locked in customer order (byte order, as record_results' batches are sorted in
 * JavaScript), so that a batch of each never deadlock. An answer after failures writes the shared
 * provider_pacing row (closing the circuit) in this commit, which waits for the disk: rare (only
 * after failures), so the row every take locks is held through a flush only then.
 */
export const MARK_SUBMITTED = defineStatement('mark_submitted', `
    with input as (
      select * from json_to_recordset($1::json) as i(id bigint, upstream_status int, at timestamptz, slot int, holder text)
    ),
    locked as (
      select r.id from underwriting_requests r
       where r.id = any (array(select id from input))
       order by r.customer_uuid collate "C"
       for update
    ),
    marked as (
      update underwriting_requests r
         set status = case when r.status = 'submitting' then 'submitted' else r.status end,
             upstream_status = i.upstream_status, updated_at = i.at
        from input i
       where r.id = any (array(select id from locked)) and r.id = i.id
      returning r.id
    ),
    ${answeredSlotsSql('input')}
    select m.id from marked m`);

/**
 * Records each acceptance (and frees its slot) in one statement; rejects the whole batch on failure.
 * Answers, in the batch's order, whether its row was found (false: it vanished, the database lost it).
 */
/** The parameters of MARK_SUBMITTED for a batch. */
export function markSubmittedParameters(batch: readonly Acceptance[]): unknown[] {
  const json = batch.map((a) => ({
    id: a.id,
    upstream_status: a.upstreamStatus,
    at: a.now.toISOString(),
    slot: a.slot?.slot ?? null,
    holder: a.slot?.holder ?? null,
  }));
  return [JSON.stringify(json)];
}

export async function markSubmitted(db: Kysely<Tables>, batch: readonly Acceptance[], parent?: SpanParent, links?: Link[]): Promise<boolean[]> {
  const rows = await runStatement<{ id: number }>(db, MARK_SUBMITTED, markSubmittedParameters(batch), parent, links);
  const found = new Set(rows.map((r) => Number(r.id)));
  return batch.map((a) => found.has(a.id));
}

/** The request columns an event's data is built from (see events/record.ts). */
export const REQUEST_DATA_COLUMNS = `id, customer_uuid, status, decision, cpf_masked, cost_saving_enabled, srd,
  submitted_at, completed_at, upstream_status, updated_at, traceparent, x_request_id`;

/**
 * Marks a request submit_failed and records its underwriting.submit_failed event in the same
 * statement; a row a callback has already completed is
 * left alone, and has no such event.
 */
const MARK_SUBMIT_FAILED = defineStatement('mark_submit_failed', `
    with failed as (
      update underwriting_requests
      set status = 'submit_failed', upstream_status = $1, upstream_error = $2, updated_at = $3
      where id = $4 and status = 'submitting'
      returning ${REQUEST_DATA_COLUMNS}
    ),
    ${requestEventsSql(EVENT_TYPE.submitFailed, 'failed')}
    select customer_uuid from failed`);

/**
 * Records a failed submit, unless a callback has already completed the row (then it is left alone);
 * true when it was recorded (and its event with it).
 */
export async function markSubmitFailed(
  db: Kysely<Tables>,
  id: number,
  failure: { upstreamStatus: number | null; error: string },
  now: Date,
  parent?: SpanParent,
): Promise<boolean> {
  const rows = await runStatement(db, MARK_SUBMIT_FAILED, [failure.upstreamStatus, failure.error, now, id], parent);
  return rows.length > 0;
}

/** A request a release ended as submit_failed (its event recorded with it). */
export interface Released {
  id: number;
  customerUuid: string;
}

/**
 * Ends abandoned requests (see abandonedAfterMs) as `submit_failed`, each with its event, so that
 * they hold their customer no longer; of one customer when given (a new submit met one), else up
 * to `limit` of any (the sweep: sweepAbandoned). A late callback still completes them. Returns what it ended.
 */
export async function releaseAbandoned(
  db: Kysely<Tables>,
  options: { now: Date; afterMs: number; customerUuid?: string; limit?: number },
): Promise<Released[]> {
  return (await sweepAbandoned(db, options)).released;
}

/**
 * releaseAbandoned for the expiry sweep: only requests submitted at or after `since` when given
 * (expiry.ts, SWEEP_OVERLAP_MS: every request ever answered left a dead `submitting` entry in
 * underwriting_requests_status_list, which a read from the beginning visits until a vacuum).
 * `complete`: fewer than `limit` were due, so every due one since `since` was ended.
 */
export async function sweepAbandoned(
  db: Kysely<Tables>,
  options: { now: Date; afterMs: number; since?: Date; customerUuid?: string; limit?: number },
): Promise<{ released: Released[]; complete: boolean }> {
  const limit = options.limit ?? 1000;
  // The sweep's read with index scans only: each dead `submitting` entry marked on its first visit
  // (INDEX_SCANS_ONLY). One customer's is a lookup of its one request in flight.
  const rows =
    options.customerUuid !== undefined
      ? await abandonedQuery(db, { ...options, limit }).execute()
      : await db.transaction().execute(async (trx) => {
          await INDEX_SCANS_ONLY.execute(trx);
          return abandonedQuery(trx, { ...options, limit }).execute();
        });
  return { released: await endEach(db, rows, ABANDONED_ERROR, options), complete: rows.length < limit };
}

/** The requests sweepAbandoned ends: `submitting` since before now less afterMs (and at or after `since`). */
export function abandonedQuery(db: Kysely<Tables>, options: { now: Date; afterMs: number; since?: Date; customerUuid?: string; limit: number }) {
  return db
    .selectFrom('underwriting_requests')
    .select(['id', 'customer_uuid'])
    .where('status', '=', 'submitting')
    .where('submitted_at', '<', new Date(options.now.getTime() - options.afterMs))
    .$if(options.since !== undefined, (qb) => qb.where('submitted_at', '>=', options.since!))
    .$if(options.customerUuid !== undefined, (qb) => qb.where('customer_uuid', '=', options.customerUuid!))
    .limit(options.limit);
}

/** What a request that was stored but never sent says in upstream_error. */
export const NOT_SENT_SLOW_STORE = 'not sent: storing the request took longer than the send window';
const NOT_SENT_RETRIED = 'not sent: the submit failed on storage after storing it, and was retried under the same Idempotency-Key';

/**
 * Ends as `submit_failed` the customer's request still `submitting` under this Idempotency-Key, in
 * any form it may be stored in (`keys`: KeyDigester.candidates, as sent by a version before digests
 * or digested under an earlier CPF_HASH_KEY): a retry of the key meets it only when the attempt
 * that stored it answered 503 and freed the key, so it was never sent. Returns what it ended.
 */
export async function releaseUnsentOfKey(
  db: Kysely<Tables>,
  options: { customerUuid: string; keys: readonly string[]; now: Date },
): Promise<Released[]> {
  const rows = await db
    .selectFrom('underwriting_requests')
    .select(['id', 'customer_uuid'])
    .where('customer_uuid', '=', options.customerUuid)
    .where('status', '=', 'submitting')
    .where('idempotency_key', 'in', options.keys)
    .execute();
  return endEach(db, rows, NOT_SENT_RETRIED, options);
}

async function endEach(
  db: Kysely<Tables>,
  rows: readonly { id: number; customer_uuid: string }[],
  error: string,
  options: { now: Date },
): Promise<Released[]> {
  const released: Released[] = [];
  for (const { id, customer_uuid } of rows) {
    // markSubmitFailed re-checks `submitting` under the row lock: two releasers end a row once.
    if (await markSubmitFailed(db, id, { upstreamStatus: null, error }, options.now)) {
      released.push({ id, customerUuid: customer_uuid });
    }
  }
  return released;
}

/** The builder queries above as `npm run sql:snapshot` writes them (docs/layout.md). */
export const SQL_SNAPSHOTS: readonly SqlSnapshot[] = [
  { name: 'release_abandoned', run: (db) => releaseAbandoned(db, { now: new Date(0), afterMs: 1000, limit: 10 }) },
  { name: 'release_abandoned_since', run: (db) => sweepAbandoned(db, { now: new Date(0), afterMs: 1000, since: new Date(0), limit: 10 }) },
  { name: 'release_abandoned_of_customer', run: (db) => releaseAbandoned(db, { now: new Date(0), afterMs: 1000, customerUuid: 'c' }) },
  { name: 'release_unsent_of_key', run: (db) => releaseUnsentOfKey(db, { customerUuid: 'c', keys: ['§d', 'k'], now: new Date(0) }) },
];
