import type { Kysely } from 'kysely';
import { runStatement } from '../db/run-statement.js';
import { defineStatement } from '../db/statements.js';
import type { SqlSnapshot } from '../db/statements.js';
import type { SpanParent } from '../tracing/spans.js';
import type { Tables } from '../db/types.js';
import { EVENT_TYPE, requestEventsSql } from '../events/record.js';

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

/** The partial unique index that lets one request per customer await its callback. */
export const ONE_IN_FLIGHT_INDEX = 'underwriting_requests_one_in_flight';

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

/** True when an insert failed because this customer already has a request in flight. */
export function isInFlightConflict(err: unknown): boolean {
  const e = err as { code?: unknown; constraint?: unknown } | null;
  return e?.code === '23505' && e.constraint === ONE_IN_FLIGHT_INDEX;
}

// The two statements of every submit, written once and prepared (Kysely building and compiling
// them on every call showed in the submit's profile). Neither reads a timestamp back: submitted_at
// is the `now` the insert was given. Instants go in as ISO text (pg formats a Date in JavaScript).
export const INSERT_SUBMITTING = defineStatement('insert_submitting', `insert into underwriting_requests
     (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, srd, status, idempotency_key, submitted_at, updated_at,
      traceparent, x_request_id)
   values ($1, $2, $3, $4, $5, 'submitting', $6, $7, $7, $8, $9)
   returning id`);
export const MARK_SUBMITTED = defineStatement('mark_submitted', `update underwriting_requests
      set status = case when status = 'submitting' then 'submitted' else status end,
          upstream_status = $1, updated_at = $2
    where id = $3
   returning id`);

/** Commits the request as `submitting`; throws a unique violation (isInFlightConflict) if one is in flight. */
export async function insertSubmitting(db: Kysely<Tables>, s: NewSubmission, parent?: SpanParent): Promise<{ id: number; submittedAt: Date }> {
  const rows = await runStatement<{ id: number }>(db, INSERT_SUBMITTING, [
    s.customerUuid,
    s.cpfHash,
    s.cpfMasked,
    s.costSavingEnabled,
    s.srd === undefined ? null : JSON.stringify(s.srd),
    s.idempotencyKey ?? null,
    s.now.toISOString(),
    s.traceparent,
    s.xRequestId,
  ], parent);
  return { id: rows[0]!.id, submittedAt: s.now };
}

/**
 * Records the provider's acceptance. The callback may have overtaken this reply and completed the
 * row already: only `submitting` moves on, nothing ever moves back. Throws when the row is gone.
 */
export async function markSubmitted(db: Kysely<Tables>, id: number, upstreamStatus: number, now: Date, parent?: SpanParent): Promise<void> {
  const rows = await runStatement<{ id: number }>(db, MARK_SUBMITTED, [upstreamStatus, now.toISOString(), id], parent);
  if (rows.length === 0) throw new Error(`underwriting request ${id} vanished before its acceptance was recorded`);
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
 * to `limit` of any (the sweep). A late callback still completes them. Returns what it ended.
 */
export async function releaseAbandoned(
  db: Kysely<Tables>,
  options: { now: Date; afterMs: number; customerUuid?: string; limit?: number },
): Promise<Released[]> {
  const cutoff = new Date(options.now.getTime() - options.afterMs);
  const rows = await db
    .selectFrom('underwriting_requests')
    .select(['id', 'customer_uuid'])
    .where('status', '=', 'submitting')
    .where('submitted_at', '<', cutoff)
    .$if(options.customerUuid !== undefined, (qb) => qb.where('customer_uuid', '=', options.customerUuid!))
    .limit(options.limit ?? 1000)
    .execute();
  return endEach(db, rows, ABANDONED_ERROR, options);
}

/** What a request that was stored but never sent says in upstream_error. */
export const NOT_SENT_SLOW_STORE = 'not sent: storing the request took longer than the send window';
const NOT_SENT_RETRIED = 'not sent: the submit failed on storage after storing it, and was retried under the same Idempotency-Key';

/**
 * Ends as `submit_failed` the customer's request still `submitting` under this Idempotency-Key: a
 * retry of the key meets it only when the attempt that stored it answered 503 and freed the key,
 * so it was never sent. Returns what it ended.
 */
export async function releaseUnsentOfKey(
  db: Kysely<Tables>,
  options: { customerUuid: string; key: string; now: Date },
): Promise<Released[]> {
  const rows = await db
    .selectFrom('underwriting_requests')
    .select(['id', 'customer_uuid'])
    .where('customer_uuid', '=', options.customerUuid)
    .where('status', '=', 'submitting')
    .where('idempotency_key', '=', options.key)
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
  { name: 'release_abandoned_of_customer', run: (db) => releaseAbandoned(db, { now: new Date(0), afterMs: 1000, customerUuid: 'c' }) },
  { name: 'release_unsent_of_key', run: (db) => releaseUnsentOfKey(db, { customerUuid: 'c', key: 'k', now: new Date(0) }) },
];
