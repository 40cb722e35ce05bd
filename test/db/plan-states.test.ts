import type { Kysely } from 'kysely';
import t from 'tap';
import type { Tables } from '../../src/db/types.js';
import { RECORD_RESULTS } from '../../src/requests/complete.js';
import { freshDatabase } from '../helpers/database.js';
import {
  analyseAll,
  holdStatistics,
  inline,
  measure,
  recordResultsBatch,
  resultFor,
  seedRequests,
  STATISTICS_STATES,
  type StatisticsState,
} from '../helpers/statement-cost.js';

// Issue 34: the per-callback statement keeps its plan and its cost per result, whatever the
// statistics say and however large the tables grew since. Buffers, not timings (docs/performance.md).

const SMALL = 500;
const LARGE = 10_000;
/** How much more a result may cost on the large table: a B-tree a level deeper, not a scan. */
const FLAT = 1.5;

/** A fresh database in `state`'s statistics, grown to `customers` (2 requests each: one completed, one waiting). */
async function grow(db: Kysely<Tables>, state: StatisticsState, prefix: string, customers: number): Promise<void> {
  await seedRequests(db, prefix, customers, 2);
  if (state === 'analysed') await analyseAll(db);
}

async function prepare(db: Kysely<Tables>, state: StatisticsState): Promise<void> {
  await holdStatistics(db);
  if (state === 'analysed empty, then grown') await analyseAll(db);
}

const batchOf = (prefix: string, from: number, n: number) => Array.from({ length: n }, (_, i) => resultFor(`${prefix}${from + i * 3}`, i));

for (const state of STATISTICS_STATES) {
  t.test(`the callback statement finds each waiting request among its customer's entries only (${state})`, async (t) => {
    const { db } = await freshDatabase(t);
    await prepare(db, state);
    await grow(db, state, 's', SMALL);
    const small = await db.connection().execute((conn) => measure(conn, inline(RECORD_RESULTS.text, recordResultsBatch(batchOf('s', 1, 32)))));
    await grow(db, state, 'l', LARGE);
    const large = await db.connection().execute((conn) => measure(conn, inline(RECORD_RESULTS.text, recordResultsBatch(batchOf('l', 1, 32)))));
    for (const { plan } of [small, large]) {
      t.match(plan, /Index Scan using underwriting_requests_awaiting_result on underwriting_requests r \(actual rows=1(\.00)? loops=32\)/, "the waiting request by its customer's entries", { plan });
      t.notMatch(plan, /BitmapAnd|underwriting_requests_list|Seq Scan on (underwriting_requests|callbacks)/, 'never a range of every request submitted before started', { plan });
      t.match(plan, /Tuples Inserted: 32/, 'every result matched and stored');
    }
    const perSmall = small.blocks / 32;
    const perLarge = large.blocks / 32;
    t.ok(perLarge <= FLAT * perSmall, `buffers per result flat: ${perSmall.toFixed(1)} at ${SMALL * 2} requests, ${perLarge.toFixed(1)} at ${(SMALL + LARGE) * 2}`);
  });
}
