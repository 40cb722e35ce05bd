import { type Kysely, sql } from 'kysely';
import { hashCpf, maskCpf } from '../../src/cpf.js';
import { RESULTS_CHANNEL } from '../../src/channels/names.js';
import type { Decision, RequestStatus, Tables } from '../../src/db/types.js';
import { decide, type UnderwritingResult } from '../../src/provider/schemas.js';
import { TEST_CPF_HASH_KEY } from '../helpers/app.js';

// Rows as the submit and callback routes store them, written directly.

export const CPF = '52998224725';
export const OTHER_CPF = '11144477735';

let sequence = 0;
/** Results "start" after the requests the tests insert now: a result matches a request submitted by its started + CORRELATION_SKEW_S. */
const STARTED_FROM = Math.ceil(Date.now() / 1000) * 1000 + 60_000;

export function resultBody(customerUuid: string, response: Partial<UnderwritingResult['response']> = {}): UnderwritingResult {
  sequence += 1;
  const started = new Date(STARTED_FROM + sequence * 1000).toISOString();
  return {
    customerUuid,
    started,
    finished: started.replace(/Z$/, '').replace(/\.\d+$/, '.500Z'),
    serviceType: 'CREDIT_SCORE',
    response: { costSavingEnabled: false, score: 710, riskBand: 2, limit: 5000, ...response },
  };
}

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

/** Empties every table, so that tests sharing one database (a fresh PGlite costs seconds) start clean. */
export async function emptyTables(db: Kysely<Tables>): Promise<void> {
  await sql`truncate underwriting_requests, callbacks, idempotency_keys restart identity cascade`.execute(db);
}
