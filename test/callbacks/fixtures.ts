import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { Kysely } from 'kysely';
import { hashCpf, maskCpf } from '../../src/cpf.js';
import type { CallbackRow, RequestStatus, Tables, UnderwritingRequestRow } from '../../src/db/types.js';
import { TEST_CPF_HASH_KEY } from '../helpers/app.js';

export const CALLBACK_URL = '/v1/callbacks/underwriting';
export const CPF = '52998224725';

/** A request row as the submit route would have stored it. */
export async function insertRequest(
  db: Kysely<Tables>,
  customerUuid: string,
  status: RequestStatus,
  options: { submittedAt?: Date; costSavingEnabled?: boolean } = {},
): Promise<number> {
  const row = await db
    .insertInto('underwriting_requests')
    .values({
      customer_uuid: customerUuid,
      status,
      cpf_hash: hashCpf(CPF, TEST_CPF_HASH_KEY),
      cpf_masked: maskCpf(CPF),
      cost_saving_enabled: options.costSavingEnabled ?? false,
      submitted_at: options.submittedAt ?? new Date(),
    })
    .returning('id')
    .executeTakeFirstOrThrow();
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
export function resultBody(customerUuid: string, o: ResultOverrides = {}) {
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

export function postCallback(
  app: FastifyInstance,
  body: unknown,
  options: { query?: string; contentType?: string | null } = {},
) {
  const payload = typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body);
  const headers: Record<string, string> = {};
  if (options.contentType !== null) headers['content-type'] = options.contentType ?? 'application/json';
  return app.inject({ method: 'POST', url: `${CALLBACK_URL}${options.query ?? ''}`, headers, payload });
}

/** A customerUuid no other test uses, so tests can share one database (a fresh PGlite costs seconds). */
export function customer(name: string): string {
  return `${name}-${randomBytes(4).toString('hex')}`;
}

/** The callbacks stored for one customer, oldest first. */
export async function callbacksOf(db: Kysely<Tables>, customerUuid: string): Promise<CallbackRow[]> {
  return db.selectFrom('callbacks').selectAll().where('customer_uuid', '=', customerUuid).orderBy('id').execute();
}

/** The callbacks stored after the given id (invalid ones may carry no customerUuid). */
export async function callbacksAfter(db: Kysely<Tables>, id: number): Promise<CallbackRow[]> {
  return db.selectFrom('callbacks').selectAll().where('id', '>', id).orderBy('id').execute();
}

export async function lastCallbackId(db: Kysely<Tables>): Promise<number> {
  const row = await db.selectFrom('callbacks').select((eb) => eb.fn.max('id').as('id')).executeTakeFirst();
  return Number(row?.id ?? 0);
}

export async function requestById(db: Kysely<Tables>, id: number): Promise<UnderwritingRequestRow> {
  return db.selectFrom('underwriting_requests').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
}
