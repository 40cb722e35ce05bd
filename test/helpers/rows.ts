import { type Kysely, sql } from 'kysely';
import { RESULTS_CHANNEL } from '../../src/channels/names.js';
import { hashCpf, maskCpf } from '../../src/cpf.js';
import type { Decision, RequestStatus, Tables } from '../../src/db/types.js';
import { decide, type UnderwritingResult } from '../../src/provider/schemas.js';
import { TEST_CPF_HASH_KEY } from './app.js';

// Rows and bodies as the gateway's routes would have stored and received them, written directly.

export const CPF = '52998224725';

export interface RequestFixture {
  customerUuid: string;
  cpf?: string;
  status?: RequestStatus;
  submittedAt?: Date | string;
  costSavingEnabled?: boolean;
  srd?: Record<string, unknown> | null;
  upstreamStatus?: number | null;
  /** Stores a matched callback with this body and completes the request. */
  result?: UnderwritingResult;
}

/** A request row as the submit route would have stored it (status `submitted` unless told). */
export async function insertRequest(db: Kysely<Tables>, f: RequestFixture): Promise<number> {
  const cpf = f.cpf ?? CPF;
  const row = await db
    .insertInto('underwriting_requests')
    .values({
      customer_uuid: f.customerUuid,
      cpf_hash: hashCpf(cpf, TEST_CPF_HASH_KEY),
      cpf_masked: maskCpf(cpf),
      cost_saving_enabled: f.costSavingEnabled ?? false,
      srd: f.srd === undefined ? JSON.stringify({ grossIncome: 8000, occupation: 'Retired' }) : f.srd === null ? null : JSON.stringify(f.srd),
      status: f.result ? 'submitted' : (f.status ?? 'submitted'),
      upstream_status: f.upstreamStatus === undefined ? 202 : f.upstreamStatus,
      ...(f.submittedAt ? { submitted_at: f.submittedAt, updated_at: f.submittedAt } : {}),
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  if (f.result) await storeResult(db, row.id, f.result, f.status ?? 'completed');
  return row.id;
}

export interface ResultOverrides {
  started?: string;
  finished?: string;
  costSavingEnabled?: boolean;
  score?: number;
  riskBand?: number;
  limit?: number;
}

/**
 * When the provider's pipeline "started" for a default result: a little after this module loaded,
 * so that a request a test inserts now qualifies (submitted no later than started + the skew),
 * and the same for every call in a run, so that repeated bodies stay duplicates.
 */
const STARTED = new Date(Math.ceil(Date.now() / 1000) * 1000 + 60_000);
export const DEFAULT_STARTED = STARTED.toISOString();
/** DEFAULT_STARTED plus some seconds: another result of the same customer. */
export const startedPlus = (seconds: number) => new Date(STARTED.getTime() + seconds * 1000).toISOString();
const DEFAULT_FINISHED = new Date(STARTED.getTime() + 10_000).toISOString();

/** A valid callback body, as the provider sends it. */
export function resultBody(customerUuid: string, o: ResultOverrides = {}): UnderwritingResult {
  return {
    customerUuid,
    started: o.started ?? DEFAULT_STARTED,
    finished: o.finished ?? DEFAULT_FINISHED,
    serviceType: 'CREDIT_SCORE',
    response: {
      costSavingEnabled: o.costSavingEnabled ?? false,
      score: o.score ?? 712.5,
      riskBand: o.riskBand ?? 3,
      limit: o.limit ?? 4500,
    },
  };
}

/** What the callback route does for a matched callback, in one transaction, announced on commit. */
export async function storeResult(
  db: Kysely<Tables>,
  requestId: number,
  body: UnderwritingResult,
  status: RequestStatus = 'completed',
): Promise<void> {
  const decision: Decision = decide(body.response);
  await db.transaction().execute(async (tx) => {
    const cb = await tx
      .insertInto('callbacks')
      .values({
        raw_body: Buffer.from(JSON.stringify(body)),
        outcome: 'matched',
        customer_uuid: body.customerUuid,
        started: body.started,
        finished: body.finished,
        body: JSON.stringify(body),
        decision,
        request_id: requestId,
        peer: '127.0.0.1',
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    await tx
      .updateTable('underwriting_requests')
      .set({ status, decision, result_callback_id: cb.id, completed_at: new Date(), updated_at: new Date() })
      .where('id', '=', requestId)
      .execute();
    await sql`select pg_notify(${RESULTS_CHANNEL}, ${body.customerUuid})`.execute(tx);
  });
}

export async function insertUnmatched(db: Kysely<Tables>, body: UnderwritingResult): Promise<void> {
  await db
    .insertInto('callbacks')
    .values({
      raw_body: Buffer.from(JSON.stringify(body)),
      outcome: 'unmatched',
      customer_uuid: body.customerUuid,
      started: body.started,
      finished: body.finished,
      body: JSON.stringify(body),
      decision: decide(body.response),
      peer: '127.0.0.1',
    })
    .execute();
}
