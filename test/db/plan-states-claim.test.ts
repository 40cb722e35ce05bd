import { type Kysely, sql } from 'kysely';
import type { Tables } from '../../src/db/types.js';
import { IN_INDEX_ORDER } from '../../src/db/plan-guards.js';
import { CLAIM_DELIVERIES } from '../../src/events/queue-sql.js';
import t from 'tap';
import { freshDatabase, SERVER_URL } from '../helpers/database.js';
import { analyseAll, FLAT, inline, measure, PLAN_STATES_FILE_TIMEOUT_MS, prepare, SET_UP_QUERY_TIMEOUT_MS, STATISTICS_STATES } from '../helpers/statement-cost.js';

t.setTimeout(PLAN_STATES_FILE_TIMEOUT_MS);

// Issue 34: the statement keeps its plan and its cost per row, whatever the
// statistics say and however large the tables grew since. Buffers, not timings (docs/performance.md).

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

/** One claim of up to 32 due deliveries, measured. */
function claim(db: Kysely<Tables>) {
  const run = inline(CLAIM_DELIVERIES.text, [new Date(Date.now() + 60_000), ['k'], 32, 15, 'token']);
  return db.connection().execute((conn) => measure(conn, run, IN_INDEX_ORDER.compile(db).sql));
}

// The plans and their cost are checked on PostgreSQL only: they are the server planner's (a
// deployment's). On PGlite, what a claim does is checked, once, at the small size.
if (!SERVER_URL) {
  t.test('a delivery claim takes a full batch of due deliveries (PGlite: what it does, not its plan)', async (t) => {
    const { db } = await freshDatabase(t, { queryTimeoutMs: SET_UP_QUERY_TIMEOUT_MS });
    await deliveries(db, 'ds-', 1_000, 'delivered');
    await deliveries(db, 'ps-', 200, 'pending');
    t.match((await claim(db)).plan, /Update on event_deliveries d \(actual rows=32(\.00)? loops=1\)/, 'a full claim');
  });
}

for (const state of SERVER_URL ? STATISTICS_STATES : []) {
  t.test(`a delivery claim walks the due index and costs what it claims, whatever the backlog (${state})`, async (t) => {
    const { db } = await freshDatabase(t, { queryTimeoutMs: SET_UP_QUERY_TIMEOUT_MS });
    await prepare(db, state);
    // Two pending deliveries per customer: the later one waits for the earlier (the order rule).
    await deliveries(db, 'ds-', 1_000, 'delivered');
    await deliveries(db, 'ps-', 200, 'pending');
    if (state === 'analysed') await analyseAll(db);
    const small = await claim(db);
    await deliveries(db, 'dl-', 20_000, 'delivered');
    await deliveries(db, 'pl-', 4_000, 'pending');
    if (state === 'analysed') await analyseAll(db);
    const large = await claim(db);
    for (const { plan } of [small, large]) {
      t.match(plan, /Index Scan using event_deliveries_due on event_deliveries d(_1)? /, 'due deliveries in order, by their index', { plan });
      t.match(plan, /Index (Only )?Scan using event_deliveries_order on event_deliveries p/, "an earlier pending delivery looked up by the order index", { plan });
      t.notMatch(plan, /Seq Scan|Sort\b/, 'no scan, no sort of the backlog', { plan });
      t.match(plan, /Update on event_deliveries d \(actual rows=32(\.00)? loops=1\)/, 'a full claim');
    }
    t.ok(large.blocks <= FLAT * small.blocks, `buffers per claimed delivery flat: ${(small.blocks / 32).toFixed(1)} with 200 pending of 1,200, ${(large.blocks / 32).toFixed(1)} with 4,200 of 25,200`);
  });
}
