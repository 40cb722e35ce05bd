import type { FastifyInstance } from 'fastify';
import { type Kysely, sql } from 'kysely';
import type { Tables } from '../../src/db/types.js';
import { cpfOf } from '../helpers/cpf.js';
import { validRequest } from '../submissions/fixtures.js';

export const NDJSON = 'application/x-ndjson';
export const CSV = 'text/csv';

/** Campaign lines' CPFs (test/helpers/cpf.ts), here beside the lines that use them. */
export { cpfOf } from '../helpers/cpf.js';

/** One campaign line: a valid submit of this customer (its CPF from `n`). */
export function line(customerUuid: string, n: number, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { ...validRequest({ customerUuid, cpf: cpfOf(n) }), ...overrides };
}

export const ndjson = (lines: unknown[]) => lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n') + '\n';

export function upload(app: FastifyInstance, payload: string, contentType = NDJSON, headers: Record<string, string> = {}) {
  return app.inject({ method: 'POST', url: '/v1/campaigns', headers: { 'content-type': contentType, ...headers }, payload });
}

export function get(app: FastifyInstance, url: string, headers: Record<string, string> = {}) {
  return app.inject({ method: 'GET', url, headers });
}

export async function requestsOf(db: Kysely<Tables>, publicId: string) {
  return db
    .selectFrom('underwriting_requests as r')
    .innerJoin('campaigns as c', 'c.id', 'r.campaign_id')
    .select(['r.id', 'r.customer_uuid', 'r.status', 'r.cpf_masked', 'r.cpf_hash', 'r.queued_body', 'r.x_request_id', 'r.srd'])
    .where('c.public_id', '=', publicId)
    .orderBy('r.id')
    .execute();
}

/**
 * What the forwarder does for a request the provider accepted, in SQL: queued -> submitted. Tests
 * of reading and results use it to reach the callback stage without a provider.
 */
export async function markForwarded(db: Kysely<Tables>, publicId: string, now = new Date()): Promise<void> {
  await sql`update underwriting_requests r set status = 'submitted', queued_body = null, submitted_at = ${now}, upstream_status = 202
    from campaigns c where c.id = r.campaign_id and c.public_id = ${publicId} and r.status = 'queued'`.execute(db);
}

/**
 * Holds every instance's forwarder back, as a provider's endless Retry-After would (the shared
 * pace's hold_until): queued requests stay queued, for tests that read them as uploaded.
 */
export async function holdTheProvider(db: Kysely<Tables>): Promise<void> {
  await sql`update provider_pacing set hold_until = now() + interval '1 day'`.execute(db);
}
