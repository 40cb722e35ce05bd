import type { Kysely } from 'kysely';
import type { Tables } from '../db/types.js';

/**
 * Requests joined to their result, selecting the columns a request's answer is built from (its
 * schema is in schemas.ts). Readers add their filters, order and any columns of their own.
 */
export function selectRequestsWithResult(db: Kysely<Tables>) {
  return db
    .selectFrom('underwriting_requests as r')
    .leftJoin('callbacks as c', 'c.id', 'r.result_callback_id')
    .select([
      'r.id',
      'r.customer_uuid',
      'r.status',
      'r.decision',
      'r.cpf_masked',
      'r.cost_saving_enabled',
      'r.srd',
      'r.submitted_at',
      'r.completed_at',
      'r.upstream_status',
      'c.body as result',
    ]);
}
