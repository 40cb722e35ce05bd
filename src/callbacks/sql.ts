import type { Kysely } from 'kysely';
import type { SqlSnapshot } from '../db/statements.js';
import type { Tables } from '../db/types.js';
import type { Arrival } from '../requests/complete.js';

export interface InvalidCallback extends Arrival {
  error: string;
  customerUuid: string | null;
  body: string | null;
}

/** Keeps a callback that is not a valid result: the raw bytes and why, for a human to look at. */
export async function recordInvalid(db: Kysely<Tables>, cb: InvalidCallback): Promise<number> {
  const row = await db
    .insertInto('callbacks')
    .values({
      received_at: cb.receivedAt,
      peer: cb.peer,
      raw_body: cb.rawBody,
      cpf_hashes: cb.cpfHashes?.length ? [...cb.cpfHashes] : null,
      outcome: 'invalid',
      error: cb.error,
      customer_uuid: cb.customerUuid,
      body: cb.body,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  return row.id;
}

/** The insert above as `npm run sql:snapshot` writes it (docs/layout.md). */
export const SQL_SNAPSHOTS: readonly SqlSnapshot[] = [
  {
    name: 'record_invalid',
    rows: [[{ id: 1 }]],
    run: (db) => recordInvalid(db, { receivedAt: new Date(0), peer: null, rawBody: Buffer.from('{}'), error: 'e', customerUuid: null, body: null }),
  },
];
