import { type Kysely, sql } from 'kysely';
import t from 'tap';
import { openDatabase } from '../../src/db/database.js';
import type { Tables } from '../../src/db/types.js';
import { CLAIM_DELIVERIES, CLAIM_IN_INDEX_ORDER } from '../../src/events/sql.js';
import { customerQuery, pageQuery } from '../../src/queries/sql.js';
import { RECORD_RESULTS, recordResults } from '../../src/requests/complete.js';
import { idArray } from '../../src/aggregates/fold.js';
import { INDEX_LOOKUPS_ONLY, removeRequestsQuery, requestBatchQuery } from '../../src/retention/sweep.js';
import { freshDatabase } from '../helpers/database.js';
import {
  analyseAll,
  executeRecordResults,
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

/** A delivery to one target for every event (delivered), as a pushing gateway leaves them. */
async function deliverAll(db: Kysely<Tables>): Promise<void> {
  await sql`insert into event_deliveries (event_id, customer_uuid, url_key, url, status, queued_at, next_attempt_at, delivered_at)
            select e.id, e.customer_uuid, 'k', 'http://127.0.0.1/', 'delivered', e.created_at, e.created_at, e.created_at
              from events e where not exists (select 1 from event_deliveries d where d.event_id = e.id)`.execute(db);
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


for (const state of STATISTICS_STATES) {
  t.test(`a retention batch deletes by index and costs what it deletes, not what the tables hold (${state})`, async (t) => {
    const { db } = await freshDatabase(t);
    await prepare(db, state);
    const cutoff = new Date(Date.now() - 3600_000);
    const sweep = async () => {
      const { rows } = await requestBatchQuery(cutoff, 100).execute(db);
      const remove = removeRequestsQuery(idArray(rows.map((r) => r.id))).compile(db);
      const setup = INDEX_LOOKUPS_ONLY.compile(db).sql;
      const measured = await db.connection().execute((conn) => measure(conn, inline(remove.sql, remove.parameters), setup));
      return { ...measured, requests: rows.length };
    };
    await grow(db, state, 's', SMALL);
    await deliverAll(db);
    if (state === 'analysed') await analyseAll(db);
    const small = await sweep();
    await grow(db, state, 'l', LARGE);
    await deliverAll(db);
    if (state === 'analysed') await analyseAll(db);
    const large = await sweep();
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

/** `n` events, each with its delivery to one target: `pending` ones due now, the others delivered. */
async function deliveries(db: Kysely<Tables>, prefix: string, n: number, status: 'pending' | 'delivered'): Promise<void> {
  await sql`
    with e as (
      insert into events (public_id, type, customer_uuid, created_at, data)
      select 'evt_' || ${prefix} || g, 'callback.unmatched', ${prefix} || (g % ${Math.max(1, Math.floor(n / 2))}::int),
             now() - interval '1 hour', '{"customerUuid": "x"}'::jsonb
        from generate_series(1, ${n}::int) as g
      returning id, customer_uuid, created_at
    )
    insert into event_deliveries (event_id, customer_uuid, url_key, url, queued_at, next_attempt_at, status)
    select id, customer_uuid, 'k', 'http://127.0.0.1/', created_at, created_at, ${status} from e`.execute(db);
}

for (const state of STATISTICS_STATES) {
  t.test(`a delivery claim walks the due index and costs what it claims, whatever the backlog (${state})`, async (t) => {
    const { db } = await freshDatabase(t);
    await prepare(db, state);
    const claim = async () => {
      const run = inline(CLAIM_DELIVERIES.text, [new Date(Date.now() + 60_000), ['k'], 32, 15, 'token']);
      return db.connection().execute((conn) => measure(conn, run, CLAIM_IN_INDEX_ORDER.compile(db).sql));
    };
    // Two pending deliveries per customer: the later one waits for the earlier (the order rule).
    await deliveries(db, 'ds-', 1_000, 'delivered');
    await deliveries(db, 'ps-', 200, 'pending');
    if (state === 'analysed') await analyseAll(db);
    const small = await claim();
    await deliveries(db, 'dl-', 20_000, 'delivered');
    await deliveries(db, 'pl-', 4_000, 'pending');
    if (state === 'analysed') await analyseAll(db);
    const large = await claim();
    for (const { plan } of [small, large]) {
      t.match(plan, /Index Scan using event_deliveries_due on event_deliveries d(_1)? /, 'due deliveries in order, by their index', { plan });
      t.match(plan, /Index (Only )?Scan using event_deliveries_order on event_deliveries p/, "an earlier pending delivery looked up by the order index", { plan });
      t.notMatch(plan, /Seq Scan|Sort\b/, 'no scan, no sort of the backlog', { plan });
      t.match(plan, /Update on event_deliveries d \(actual rows=32(\.00)? loops=1\)/, 'a full claim');
    }
    t.ok(large.blocks <= FLAT * small.blocks, `buffers per claimed delivery flat: ${(small.blocks / 32).toFixed(1)} with 200 pending of 1,200, ${(large.blocks / 32).toFixed(1)} with 4,200 of 25,200`);
  });
}

for (const state of STATISTICS_STATES) {
  t.test(`GET one, a list page and a lookup read by index and cost what they return (${state})`, async (t) => {
    // Tables of a few hundred rows are read whole (a page or two, cheaper than an index): the
    // comparison is between two sizes where an index is the only sane way.
    const { db } = await freshDatabase(t);
    await prepare(db, state);
    const reads = () => {
      const queries = {
        'GET one': customerQuery('m7').compile(db),
        'list page': pageQuery(db, {}, undefined, 50).compile(),
        lookup: pageQuery(db, { cpfHashes: ['h-m7'] }, undefined, 50).compile(),
      };
      return Promise.all(
        Object.entries(queries).map(async ([name, q]) => ({ name, ...(await db.connection().execute((conn) => measure(conn, inline(q.sql, q.parameters)))) })),
      );
    };
    const hashed = (prefix: string) => sql`update underwriting_requests set cpf_hash = 'h-' || customer_uuid where customer_uuid like ${prefix + '%'}`.execute(db);
    await grow(db, state, 'm', LARGE / 2);
    await hashed('m');
    const mid = await reads();
    await grow(db, state, 'l', LARGE * 2);
    await hashed('l');
    if (state === 'analysed') await analyseAll(db);
    const large = await reads();
    for (const [i, read] of mid.entries()) {
      for (const { plan } of [read, large[i]!]) {
        t.notMatch(plan, /Seq Scan on (underwriting_requests|callbacks)|BitmapAnd/, `${read.name}: by index`, { plan });
      }
      t.ok(large[i]!.blocks <= FLAT * read.blocks, `${read.name}: buffers flat, ${read.blocks} at ${LARGE} requests, ${large[i]!.blocks} at ${LARGE * 5}`, { plan: large[i]!.plan });
    }
  });
}
