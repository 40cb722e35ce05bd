import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { Kysely } from 'kysely';
import type { CallbackRow, Tables, UnderwritingRequestRow } from '../../src/db/types.js';

export const CALLBACK_URL = '/v1/callbacks/underwriting';
export { CPF, DEFAULT_STARTED, insertRequest, type ResultOverrides, resultBody, startedPlus } from '../helpers/rows.js';

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
