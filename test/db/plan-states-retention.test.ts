import type { Kysely } from 'kysely';
import type { Tables } from '../../src/db/types.js';
import { idArray } from '../../src/aggregates/fold.js';
import { INDEX_LOOKUPS_ONLY } from '../../src/db/plan-guards.js';
import { removeRequestsQuery, requestBatchQuery } from '../../src/retention/sweep.js';
import t from 'tap';
import { freshDatabase, SERVER_URL } from '../helpers/database.js';
import { analyseAll, deliverAll, FLAT, grow, inline, LARGE, measure, PLAN_STATES_FILE_TIMEOUT_MS, prepare, SET_UP_QUERY_TIMEOUT_MS, SMALL, STATISTICS_STATES } from '../helpers/statement-cost.js';

t.setTimeout(PLAN_STATES_FILE_TIMEOUT_MS);

// Issue 34: the statement keeps its plan and its cost per row, whatever the
// statistics say and however large the tables grew since. Buffers, not timings (docs/performance.md).

/** One retention batch of 100 requests completed over an hour ago, its delete measured. */
async function sweep(db: Kysely<Tables>) {
  const { rows } = await requestBatchQuery(new Date(Date.now() - 3600_000), 100).execute(db);
  const remove = removeRequestsQuery(idArray(rows.map((r) => r.id))).compile(db);
  const setup = INDEX_LOOKUPS_ONLY.compile(db).sql;
  const measured = await db.connection().execute((conn) => measure(conn, inline(remove.sql, remove.parameters), setup));
  return { ...measured, requests: rows.length };
}

// The plans and their cost are checked on PostgreSQL only: they are the server planner's (a
// deployment's), and at these sizes the file took 21-42 s of the PGlite run. On PGlite, what a
// batch does is checked, once, at the small size.
if (!SERVER_URL) {
  t.test('a retention batch takes 100 completed requests and deletes them with their deliveries (PGlite: what it does, not its plan)', async (t) => {
    const { db } = await freshDatabase(t, { queryTimeoutMs: SET_UP_QUERY_TIMEOUT_MS });
    await grow(db, 'never analysed', 's', SMALL);
    await deliverAll(db);
    const small = await sweep(db);
    t.equal(small.requests, 100, 'a full batch of completed requests');
    t.match(small.plan, /Delete on event_deliveries[^\n]*\(actual rows=100(\.00)? loops=1\)/, 'the batch had its deliveries');
  });
}

for (const state of SERVER_URL ? STATISTICS_STATES : []) {
  t.test(`a retention batch deletes by index and costs what it deletes, not what the tables hold (${state})`, async (t) => {
    const { db } = await freshDatabase(t, { queryTimeoutMs: SET_UP_QUERY_TIMEOUT_MS });
    await prepare(db, state);
    await grow(db, state, 's', SMALL);
    await deliverAll(db);
    if (state === 'analysed') await analyseAll(db);
    const small = await sweep(db);
    await grow(db, state, 'l', LARGE);
    await deliverAll(db);
    if (state === 'analysed') await analyseAll(db);
    const large = await sweep(db);
    for (const { plan, requests } of [small, large]) {
      t.equal(requests, 100, 'a full batch of completed requests');
      t.notMatch(plan, /Seq Scan|Hash (Semi |Anti )?Join/, 'every delete is an index lookup', { plan });
      for (const index of ['idempotency_keys_request', 'callbacks_request', 'events_request', 'events_callback', 'event_deliveries_event_id_url_key_key', 'underwriting_requests_pkey']) {
        t.match(plan, new RegExp(`Scan on ${index}|Scan using ${index}`), `by ${index}`, { plan });
      }
    }
    // Each request: its callback, its event, its delivery.
    t.match(small.plan, /Delete on event_deliveries[^\n]*\(actual rows=100(\.00)? loops=1\)/, 'the batch had its deliveries');
    t.ok(large.blocks <= FLAT * small.blocks, `buffers per purged request flat: ${(small.blocks / 100).toFixed(1)} at ${SMALL * 2} requests, ${(large.blocks / 100).toFixed(1)} at ${(SMALL + LARGE) * 2}`);
  });
}
