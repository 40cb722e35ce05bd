import type { Kysely } from 'kysely';
import { runStatement, type Statement } from '../db/database.js';
import type { DB, RequestStatus } from '../db/types.js';

/**
 * A request still `submitting` this long after its submit began was abandoned by a process that
 * died mid-submit (twice the upstream timeout and 30 s, past any live submit). Its idempotency
 * key may be taken over, and the expiry sweep expires it.
 */
export const abandonedAfterMs = (upstreamTimeoutMs: number): number => 2 * upstreamTimeoutMs + 30_000;

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
}

export interface StoredState {
  status: RequestStatus;
  submittedAt: Date;
}

/** True when an insert failed because this customer already has a request in flight. */
export function isInFlightConflict(err: unknown): boolean {
  const e = err as { code?: unknown; constraint?: unknown } | null;
  return e?.code === '23505' && e.constraint === ONE_IN_FLIGHT_INDEX;
}

// The two statements of every submit, written once and prepared: Kysely building and compiling
// them on every call was ~10% of the gateway's CPU per submit.
const INSERT_SUBMITTING: Statement = {
  name: 'insert_submitting',
  text: `insert into underwriting_requests
     (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, srd, status, idempotency_key, submitted_at, updated_at)
   values ($1, $2, $3, $4, $5, 'submitting', $6, $7, $7)
   returning id, submitted_at`,
};
const MARK_SUBMITTED: Statement = {
  name: 'mark_submitted',
  text: `update underwriting_requests
      set status = case when status = 'submitting' then 'submitted' else status end,
          upstream_status = $1, updated_at = $2
    where id = $3
   returning status, submitted_at`,
};

/** Commits the request as `submitting`; throws a unique violation (isInFlightConflict) if one is in flight. */
export async function insertSubmitting(db: Kysely<DB>, s: NewSubmission): Promise<{ id: number; submittedAt: Date }> {
  const rows = await runStatement<{ id: number; submitted_at: Date }>(db, INSERT_SUBMITTING, [
    s.customerUuid,
    s.cpfHash,
    s.cpfMasked,
    s.costSavingEnabled,
    s.srd === undefined ? null : JSON.stringify(s.srd),
    s.idempotencyKey ?? null,
    s.now,
  ]);
  const row = rows[0]!;
  return { id: row.id, submittedAt: row.submitted_at };
}

/**
 * Records the provider's acceptance. The callback may have overtaken this reply and completed the
 * row already: only `submitting` moves on, nothing ever moves back. Returns the state as stored.
 */
export async function markSubmitted(db: Kysely<DB>, id: number, upstreamStatus: number, now: Date): Promise<StoredState> {
  const rows = await runStatement<{ status: RequestStatus; submitted_at: Date }>(db, MARK_SUBMITTED, [upstreamStatus, now, id]);
  const row = rows[0];
  if (!row) throw new Error(`underwriting request ${id} vanished before its acceptance was recorded`);
  return { status: row.status, submittedAt: row.submitted_at };
}

/** Records a failed submit, unless a callback has already completed the row (then it is left alone). */
export async function markSubmitFailed(
  db: Kysely<DB>,
  id: number,
  failure: { upstreamStatus: number | null; error: string },
  now: Date,
): Promise<void> {
  await db
    .updateTable('underwriting_requests')
    .set({ status: 'submit_failed', upstream_status: failure.upstreamStatus, upstream_error: failure.error, updated_at: now })
    .where('id', '=', id)
    .where('status', '=', 'submitting')
    .execute();
}

/** Requests awaiting their callback or the provider's answer to the submit. */
export async function countPending(db: Kysely<DB>): Promise<number> {
  const row = await db
    .selectFrom('underwriting_requests')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('status', 'in', ['submitting', 'submitted'])
    .executeTakeFirstOrThrow();
  return Number(row.n);
}
