import { type Kysely, sql } from 'kysely';
import type { Tables } from '../../src/db/types.js';
import { openDatabase } from '../../src/db/database.js';
import { STATEMENT_PLANNED_ONCE } from '../../src/db/plan-guards.js';
import { RECORD_RESULTS, recordResults } from '../../src/requests/complete.js';
import t from 'tap';
import { freshDatabase, SERVER_URL } from '../helpers/database.js';
import { batchOf, executeRecordResults, FLAT, grow, inline, LARGE, measure, measureRecordResults, PLAN_STATES_FILE_TIMEOUT_MS, prepare, recordResultsBatch, seedRequests, SET_UP_QUERY_TIMEOUT_MS, SMALL, STATISTICS_STATES } from '../helpers/statement-cost.js';

t.setTimeout(PLAN_STATES_FILE_TIMEOUT_MS);

// Issue 34: the statement keeps its plan and its cost per row, whatever the
// statistics say and however large the tables grew since. Buffers, not timings (docs/performance.md).

/**
 * The callback statement for 32 waiting requests of `prefix`'s customers, measured as the gateway
 * runs it: on PostgreSQL the connection's plan made once under STATEMENT_PLANNED_ONCE (the small
 * table's, when the same connection measures the large one); on PGlite as plain SQL.
 */
const recordBatch = (db: Kysely<Tables>, prefix: string) =>
  db.connection().execute((conn) =>
    SERVER_URL ? measureRecordResults(conn, batchOf(prefix, 1, 32)) : measure(conn, inline(RECORD_RESULTS.text, recordResultsBatch(batchOf(prefix, 1, 32)))),
  );

// The plans and their cost are checked on PostgreSQL only: they are the server planner's (a
// deployment's), and at these sizes the file took 25-58 s of the PGlite run. On PGlite, what the
// statement does is checked, once, at the small size.
if (!SERVER_URL) {
  t.test('the callback statement matches and stores a result for each waiting request (PGlite: what it does, not its plan)', async (t) => {
    const { db } = await freshDatabase(t, { queryTimeoutMs: SET_UP_QUERY_TIMEOUT_MS });
    await grow(db, 'never analysed', 's', SMALL);
    t.match((await recordBatch(db, 's')).plan, /Tuples Inserted: 32/, 'every result matched and stored');
  });
}

for (const state of SERVER_URL ? STATISTICS_STATES : []) {
  t.test(`the callback statement finds each waiting request among its customer's entries only (${state})`, async (t) => {
    const { db } = await freshDatabase(t, { queryTimeoutMs: SET_UP_QUERY_TIMEOUT_MS });
    await prepare(db, state);
    await grow(db, state, 's', SMALL);
    const small = await recordBatch(db, 's');
    await grow(db, state, 'l', LARGE);
    const large = await recordBatch(db, 'l');
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

if (SERVER_URL) t.test('a connection plans the callback statement once, while the tables are tiny, and that plan still looks up by index once they grew', async (t) => {
  // The gateway's pool keeps connections open for hours: the plan it keeps (the prepared statement's
  // generic plan, its foreign-key checks'), made at go-live, must cost per result what a plan made
  // for the grown tables costs (STATEMENT_PLANNED_ONCE: made with sequential scans off).
  const database = await freshDatabase(t, { queryTimeoutMs: SET_UP_QUERY_TIMEOUT_MS });
  await prepare(database.db, 'analysed empty, then grown');
  // One connection, so that the statement prepared while tiny is the one measured.
  const one = await openDatabase({ databaseUrl: database.url!, dataDir: 'memory://', poolSize: 1 });
  t.teardown(() => one.close());
  await seedRequests(one.db, 'tiny-', 80, 1);
  for (let b = 0; b < 10; b++) await recordResults(one.db, batchOf('tiny-', b, 8).map((r, i) => ({ ...r, customerUuid: `tiny-${b * 8 + i}` })), { skewS: 300 });
  const planned = await sql<{ generic_plans: number; custom_plans: number }>`
    select generic_plans::int, custom_plans::int from pg_prepared_statements where name = ${RECORD_RESULTS.name}`.execute(one.db);
  t.same(planned.rows, [{ generic_plans: 10, custom_plans: 0 }], 'planned once: every batch ran the one plan made at the first');
  await seedRequests(one.db, 'l', LARGE, 2);
  const batch = batchOf('l', 1, 32);
  const kept = await one.db.connection().execute((conn) => measure(conn, executeRecordResults(batch), STATEMENT_PLANNED_ONCE));
  // The same tables in another database, whose plans were made once they had grown.
  const other = await freshDatabase(t, { queryTimeoutMs: SET_UP_QUERY_TIMEOUT_MS });
  await prepare(other.db, 'analysed empty, then grown');
  await seedRequests(other.db, 'l', LARGE, 2);
  const fresh = await other.db.connection().execute((conn) => measureRecordResults(conn, batch));
  t.match(kept.plan, /Index Scan using underwriting_requests_awaiting_result on underwriting_requests r \(actual rows=1(\.00)? loops=32\)/, "the waiting request by its customer's entries", { plan: kept.plan });
  t.notMatch(kept.plan, /Seq Scan on (underwriting_requests|callbacks)/, 'no plan made for a tiny table', { plan: kept.plan });
  t.ok(kept.blocks <= FLAT * fresh.blocks, `buffers per result on the old connection ${(kept.blocks / 32).toFixed(1)}, planned for the grown tables ${(fresh.blocks / 32).toFixed(1)}`);
});
