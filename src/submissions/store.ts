import { type Kysely, sql } from 'kysely';
import type { DB, RequestStatus } from '../db/types.js';

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

/** Commits the request as `submitting`; throws a unique violation (isInFlightConflict) if one is in flight. */
export async function insertSubmitting(db: Kysely<DB>, s: NewSubmission): Promise<{ id: number; submittedAt: Date }> {
  const row = await db
    .insertInto('underwriting_requests')
    .values({
      customer_uuid: s.customerUuid,
      cpf_hash: s.cpfHash,
      cpf_masked: s.cpfMasked,
      cost_saving_enabled: s.costSavingEnabled,
      srd: s.srd === undefined ? null : JSON.stringify(s.srd),
      status: 'submitting',
      idempotency_key: s.idempotencyKey ?? null,
      submitted_at: s.now,
      updated_at: s.now,
    })
    .returning(['id', 'submitted_at'])
    .executeTakeFirstOrThrow();
  return { id: row.id, submittedAt: row.submitted_at };
}

/**
 * Records the provider's acceptance. The callback may have overtaken this reply and completed the
 * row already: only `submitting` moves on, nothing ever moves back. Returns the state as stored.
 */
export async function markSubmitted(db: Kysely<DB>, id: number, upstreamStatus: number, now: Date): Promise<StoredState> {
  const row = await db
    .updateTable('underwriting_requests')
    .set({
      status: sql<RequestStatus>`case when status = 'submitting' then 'submitted' else status end`,
      upstream_status: upstreamStatus,
      updated_at: now,
    })
    .where('id', '=', id)
    .returning(['status', 'submitted_at'])
    .executeTakeFirstOrThrow();
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
