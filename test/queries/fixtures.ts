import { type Kysely, sql } from 'kysely';
import type { Tables } from '../../src/db/types.js';
import type { UnderwritingResult } from '../../src/provider/schemas.js';
import { resultBody } from '../helpers/rows.js';

// Rows as the submit and callback routes store them, written directly: test/helpers/rows.ts.
export { CPF, insertRequest, insertUnmatched, type RequestFixture, storeResult } from '../helpers/rows.js';

export const OTHER_CPF = '11144477735';

let sequence = 0;
/** Results "start" after the requests the tests insert now: a result matches a request submitted by its started + CORRELATION_SKEW_S. */
const STARTED_FROM = Math.ceil(Date.now() / 1000) * 1000 + 60_000;

/** A valid result whose started (and finished) no other result of the run has: several can be stored for one customer. */
export function distinctResult(customerUuid: string, response: Partial<UnderwritingResult['response']> = {}): UnderwritingResult {
  sequence += 1;
  const started = new Date(STARTED_FROM + sequence * 1000).toISOString();
  return resultBody(customerUuid, {
    started,
    finished: started.replace(/Z$/, '').replace(/\.\d+$/, '.500Z'),
    score: 710,
    riskBand: 2,
    limit: 5000,
    ...response,
  });
}

/** Empties every table, so that tests sharing one database (a fresh PGlite costs seconds) start clean. */
export async function emptyTables(db: Kysely<Tables>): Promise<void> {
  await sql`truncate underwriting_requests, callbacks, idempotency_keys, events restart identity cascade`.execute(db);
}
