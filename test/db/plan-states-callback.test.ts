import { openDatabase } from '../../src/db/database.js';
import { RECORD_RESULTS, recordResults } from '../../src/requests/complete.js';
import t from 'tap';
import { freshDatabase } from '../helpers/database.js';
import { batchOf, executeRecordResults, FLAT, grow, inline, LARGE, measure, prepare, recordResultsBatch, resultFor, seedRequests, SMALL, STATISTICS_STATES } from '../helpers/statement-cost.js';


// Issue 34: the statement keeps its plan and its cost per row, whatever the
// statistics say and however large the tables grew since. Buffers, not timings (docs/performance.md).


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

t.test('a connection that planned the callback statement while the tables were tiny plans it afresh once they grew', async (t) => {
  // The gateway's pool keeps connections open for hours: a plan cached at go-live (a prepared
  // statement's generic plan, a foreign-key check's) must not outlive the table size it was made for.
  const database = await freshDatabase(t);
  await prepare(database.db, 'analysed empty, then grown');
  // One connection, so that the statement prepared while tiny is the one measured.
  const one = database.url ? await openDatabase({ databaseUrl: database.url, dataDir: 'memory://', poolSize: 1 }) : database;
  if (one !== database) t.teardown(() => one.close());
  await seedRequests(one.db, 'tiny-', 80, 1);
  for (let b = 0; b < 10; b++) await recordResults(one.db, batchOf('tiny-', b, 8).map((r, i) => ({ ...r, customerUuid: `tiny-${b * 8 + i}` })), { skewS: 300 });
  await seedRequests(one.db, 'l', LARGE, 2);
  const batch = batchOf('l', 1, 32);
  const run = database.engine === 'postgres' ? executeRecordResults(batch) : inline(RECORD_RESULTS.text, recordResultsBatch(batch));
  const kept = await one.db.connection().execute((conn) => measure(conn, run));
  // The same tables in another database (PGlite: another engine), whose plans were never cached while tiny.
  const other = await freshDatabase(t);
  await prepare(other.db, 'analysed empty, then grown');
  await seedRequests(other.db, 'l', LARGE, 2);
  const fresh = await other.db.connection().execute((conn) => measure(conn, inline(RECORD_RESULTS.text, recordResultsBatch(batch))));
  t.notMatch(kept.plan, /Seq Scan on (underwriting_requests|callbacks)/, 'no plan made for a tiny table', { plan: kept.plan });
  t.ok(kept.blocks <= FLAT * fresh.blocks, `buffers per result on the old connection ${(kept.blocks / 32).toFixed(1)}, planned afresh ${(fresh.blocks / 32).toFixed(1)}`);
});
