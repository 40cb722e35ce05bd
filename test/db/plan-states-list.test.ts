import { type Kysely, sql } from 'kysely';
import type { Tables } from '../../src/db/types.js';
import type { Position } from '../../src/http/cursor.js';
import { IN_INDEX_ORDER } from '../../src/db/plan-guards.js';
import { type ListFilter, listInIndexOrder, pageQuery } from '../../src/queries/sql.js';
import t from 'tap';
import { freshDatabase, SERVER_URL } from '../helpers/database.js';
import { analyseAll, FLAT, grow, inline, LARGE, measure, PLAN_STATES_FILE_TIMEOUT_MS, prepare, SET_UP_QUERY_TIMEOUT_MS, STATISTICS_STATES } from '../helpers/statement-cost.js';

t.setTimeout(PLAN_STATES_FILE_TIMEOUT_MS);

// Issue 34: the statement keeps its plan and its cost per row, whatever the
// statistics say and however large the tables grew since. Buffers, not timings (docs/performance.md).

/** One customer in 50 submitted and refused by the provider (submitting, then submit_failed): a rare status. */
async function refuseSome(db: Kysely<Tables>, prefix: string, customers: number): Promise<void> {
  await sql`
    insert into underwriting_requests (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, status, submitted_at, updated_at)
    select ${prefix} || 'f' || c, md5(${prefix} || 'f' || c), '***.456.789-**', false, 'submitting',
           now() - interval '1 day' + interval '90 seconds' + c * interval '50 milliseconds', now()
      from generate_series(0, ${Math.floor(customers / 50)}::int - 1) c`.execute(db);
  await sql`update underwriting_requests set status = 'submit_failed', upstream_status = 500
             where customer_uuid like ${prefix + 'f%'} and status = 'submitting'`.execute(db);
}

/** Where the page after the `skip` newest requests of `status` starts. */
async function positionAfter(db: Kysely<Tables>, status: string, skip: number): Promise<Position> {
  const { rows } = await sql<{ t: string; id: number }>`
    select to_char(submitted_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as t, id::int as id
      from underwriting_requests where status = ${status}
     order by submitted_at desc, id desc offset ${skip} limit 1`.execute(db);
  return rows[0]!;
}

const since = () => new Date(Date.now() - 2 * 86_400_000).toISOString();
const until = () => new Date(Date.now() + 60_000).toISOString();

// PostgreSQL only: at these sizes a file takes past its time limit on PGlite (seen: over 480 s),
// and the plans that matter are the server's.
for (const state of SERVER_URL ? STATISTICS_STATES : []) {
  t.test(`a list page filtered by status reads only that status's entries, common or rare, however many newer rows it is not (${state})`, async (t) => {
    // The newest requests are all waiting (a campaign in flight): walking the whole list newest
    // first and filtering read every one of them before the first completed request.
    const { db } = await freshDatabase(t, { queryTimeoutMs: SET_UP_QUERY_TIMEOUT_MS });
    await prepare(db, state);
    const pages = async () => {
      const filters: Array<[string, ListFilter, Position | undefined]> = [
        ['completed', { status: 'completed' }, undefined],
        ['completed, next page', { status: 'completed' }, await positionAfter(db, 'completed', 100)],
        ['completed, since/until', { status: 'completed', since: since(), until: until() }, undefined],
        ['completed, since/until, next page', { status: 'completed', since: since(), until: until() }, await positionAfter(db, 'completed', 100)],
        ['submit_failed', { status: 'submit_failed' }, undefined],
        ['submit_failed, next page', { status: 'submit_failed' }, await positionAfter(db, 'submit_failed', 40)],
        ['submit_failed, since/until', { status: 'submit_failed', since: since(), until: until() }, undefined],
        ['approved', { decision: 'approved' }, undefined],
        ['completed and approved', { status: 'completed', decision: 'approved' }, undefined],
      ];
      const measured = [];
      for (const [name, filter, after] of filters) {
        const q = pageQuery(db, filter, after, 50).compile();
        const setup = listInIndexOrder(filter) ? IN_INDEX_ORDER.compile(db).sql : undefined;
        measured.push({ name, ...(await db.connection().execute((conn) => measure(conn, inline(q.sql, q.parameters), setup))) });
      }
      return measured;
    };
    await grow(db, state, 'm', LARGE / 2);
    await refuseSome(db, 'm', LARGE / 2);
    if (state === 'analysed') await analyseAll(db);
    const mid = await pages();
    await grow(db, state, 'l', LARGE * 2);
    await refuseSome(db, 'l', LARGE * 2);
    if (state === 'analysed') await analyseAll(db);
    const large = await pages();
    for (const [i, page] of mid.entries()) {
      for (const { plan } of [page, large[i]!]) {
        t.notMatch(plan, /underwriting_requests_list|Seq Scan on (underwriting_requests|callbacks)|Sort\b/, `${page.name}: never the whole list filtered, nor a sort`, { plan });
        t.match(plan, /Index Scan using underwriting_requests_(status|decision)_list on underwriting_requests r/, `${page.name}: the filter's own index, in order`, { plan });
        t.match(plan, /Limit \(actual rows=\d+/, `${page.name}: a page`);
      }
      t.ok(large[i]!.blocks <= FLAT * page.blocks, `${page.name}: buffers flat, ${page.blocks} at ${LARGE + LARGE / 50} requests, ${large[i]!.blocks} at ${LARGE * 5 + LARGE / 10}`, { plan: large[i]!.plan });
    }
  });
}
