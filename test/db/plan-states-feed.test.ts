import { type Kysely, sql } from 'kysely';
import type { Tables } from '../../src/db/types.js';
import { IN_INDEX_ORDER } from '../../src/db/plan-guards.js';
import { type FeedFilter, type FeedPosition, feedByType, feedHorizon, feedQuery } from '../../src/events/feed-sql.js';
import t from 'tap';
import { freshDatabase, SERVER_URL } from '../helpers/database.js';
import { analyseAll, deliverAll, FLAT, grow, inline, LARGE, measure, PLAN_STATES_FILE_TIMEOUT_MS, prepare, SET_UP_QUERY_TIMEOUT_MS, STATISTICS_STATES } from '../helpers/statement-cost.js';

t.setTimeout(PLAN_STATES_FILE_TIMEOUT_MS);

// Issue 34: the statement keeps its plan and its cost per row, whatever the
// statistics say and however large the tables grew since. Buffers, not timings (docs/performance.md).

/** One customer in 50 refused by the provider: its underwriting.submit_failed event (a rare type). */
async function refusals(db: Kysely<Tables>, prefix: string, customers: number): Promise<void> {
  await sql`
    insert into events (public_id, type, customer_uuid, created_at, data)
    select 'evt_' || ${prefix} || 'f' || c, 'underwriting.submit_failed', ${prefix} || 'f' || c, now(), '{}'::jsonb
      from generate_series(0, ${Math.floor(customers / 50)}::int - 1) c`.execute(db);
}

/** The feed position `back` events before the newest. */
async function near(db: Kysely<Tables>, back: number): Promise<FeedPosition> {
  const { rows } = await sql<{ tx: string; id: number }>`
    select tx_id::text as tx, id::int as id from events order by tx_id desc, id desc offset ${back} limit 1`.execute(db);
  return rows[0]!;
}

// PostgreSQL only: at these sizes a file takes past its time limit on PGlite (seen: over 480 s),
// and the plans that matter are the server's.
for (const state of SERVER_URL ? STATISTICS_STATES : []) {
  t.test(`a feed page reads its events in feed order by index and costs what it returns, whatever its filter (${state})`, async (t) => {
    const { db } = await freshDatabase(t, { queryTimeoutMs: SET_UP_QUERY_TIMEOUT_MS });
    await prepare(db, state);
    // A consumer of a rare type: at first, its next page is the next events; later, its next page
    // lies behind every event of other types written since.
    const pages = async (rareAfter: FeedPosition) => {
      const horizon = await feedHorizon(db);
      const reads: Array<[string, FeedFilter, FeedPosition | undefined]> = [
        ['from the start', {}, undefined],
        ['a consumer near the end', {}, await near(db, 100)],
        ['one customer', { customerUuid: 'm7' }, undefined],
        ['the common type, near the end', { type: 'underwriting.completed' }, await near(db, 100)],
        ['a rare type, its next page', { type: 'underwriting.submit_failed' }, rareAfter],
      ];
      const measured = [];
      for (const [name, filter, after] of reads) {
        const q = feedQuery(db, filter, after, 50, ['k'], horizon).compile();
        const setup = feedByType(filter) ? IN_INDEX_ORDER.compile(db).sql : undefined;
        measured.push({ name, ...(await db.connection().execute((conn) => measure(conn, inline(q.sql, q.parameters), setup))) });
      }
      return measured;
    };
    await grow(db, state, 'm', LARGE / 2);
    await refusals(db, 'm', LARGE / 2);
    await deliverAll(db);
    if (state === 'analysed') await analyseAll(db);
    const mid = await pages(await near(db, LARGE / 2 / 50));
    const caughtUp = await near(db, 0);
    await grow(db, state, 'l', LARGE * 2);
    await refusals(db, 'l', LARGE * 2);
    await deliverAll(db);
    if (state === 'analysed') await analyseAll(db);
    const large = await pages(caughtUp);
    for (const [i, page] of mid.entries()) {
      for (const { plan } of [page, large[i]!]) {
        t.notMatch(plan, /Seq Scan on (events|event_deliveries)/, `${page.name}: by index`, { plan });
        t.match(plan, /Index Scan using events_\w+ on events e|Bitmap Index Scan on events_customer_feed/, `${page.name}: an index of events`, { plan });
        // A page of the whole feed or of a type comes in index order; one customer's few events may be sorted.
        // (A sort inside the deliveries' subplan is jsonb_agg's order by, presorted on PostgreSQL 16+.)
        if (!page.name.startsWith('one customer')) t.notMatch(plan, /Sort Key: (e\.type, )?e\.tx_id/, `${page.name}: in feed order, unsorted`, { plan });
      }
      t.ok(large[i]!.blocks <= FLAT * page.blocks, `${page.name}: buffers flat, ${page.blocks} at ${LARGE / 2} events, ${large[i]!.blocks} at ${LARGE * 2.5}`, { plan: large[i]!.plan });
    }
  });
}
