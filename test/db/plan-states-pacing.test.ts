import { type Kysely, sql } from 'kysely';
import type { Tables } from '../../src/db/types.js';
import { definedStatements } from '../../src/db/statements.js';
import '../../src/provider/sql.js';
import '../../src/requests/sql.js';
import '../../src/submissions/queue.js';
import t from 'tap';
import { freshDatabase, SERVER_URL } from '../helpers/database.js';
import { FORWARD, ONCE_PER_PROCESS, PACED_STATEMENTS } from '../helpers/paced-statements.js';
import { FLAT, grow, inline, LARGE, measure, type Measured, PLAN_STATES_FILE_TIMEOUT_MS, prepare, SET_UP_QUERY_TIMEOUT_MS, SMALL, STATISTICS_STATES } from '../helpers/statement-cost.js';

t.setTimeout(PLAN_STATES_FILE_TIMEOUT_MS);

// Issue 34 and 37: the provider pace's statements and the forwarder's run per forwarded request, on
// the pacing pool (DatabaseHandle.pacingDb), whose connections plan each statement once and keep
// that plan for their whole life (PLANS_MADE_ONCE). A plan made while the tables were tiny must
// still look up by index once they have grown. Buffers, not timings (docs/performance.md).

const textOf = new Map(definedStatements().map(({ statement }) => [statement.name, statement.text]));

/** `n` queued requests of `prefix`'s customers (a campaign's, waiting for the provider's pace). */
async function queued(db: Kysely<Tables>, prefix: string, n: number): Promise<void> {
  await sql`
    insert into underwriting_requests (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, status, submitted_at, updated_at, queued_at, queued_body)
    select ${prefix} || g, md5(${prefix} || g), '***.456.789-**', false, 'queued', now(), now(), now(), '\\x00'::bytea
      from generate_series(1, ${n}::int) g`.execute(db);
}

/** Every statement of a forward, each as an EXECUTE of the connection's prepared statement (prepared here the first time). */
async function forward(conn: Kysely<Tables>, prefix: string, slots: number): Promise<Map<string, Measured>> {
  // A request of its own, newer than every queued one: the entries the rolled-back measurements leave
  // in the queue's index (a return to the queue) sit behind the queued ones, not ahead of them.
  const { rows } = await sql<{ id: number }>`
    insert into underwriting_requests (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, status, submitted_at, updated_at)
    values (${prefix + '-measured'}, 'h', '***.456.789-**', false, 'submitted', now(), now()) returning id`.execute(conn);
  const id = Number(rows[0]!.id);
  const measured = new Map<string, Measured>();
  for (const [name, parameters] of FORWARD(id, new Date().toISOString(), slots)) {
    const prepared = `${name}_paced`;
    const execute = parameters.length === 0 ? `execute ${prepared}` : `execute ${prepared}${inline(`(${parameters.map((_, i) => `$${i + 1}`).join(', ')})`, parameters)}`;
    // The request is being sent (it was queued), as when its outcome is written (rolled back with the measurement).
    const setup = `update underwriting_requests set status = 'submitting', queued_at = submitted_at where id = ${id}`;
    const { rows: known } = await sql`select 1 from pg_prepared_statements where name = ${prepared}`.execute(conn);
    if (known.length === 0) {
      await sql.raw(`prepare ${prepared} as ${textOf.get(name)!}`).execute(conn);
      // Planned here, once: what the plan reads while being made is not the statement's cost.
      await measure(conn, execute, setup);
    }
    measured.set(name, await measure(conn, execute, setup));
  }
  return measured;
}

if (SERVER_URL) {
  t.test("the pacing pool's connections plan once, with sequential scans off; the routes' plan every call", async (t) => {
    const database = await freshDatabase(t);
    const settings = (db: Kysely<Tables>) =>
      db.connection().execute(async (conn) => (await sql<{ mode: string; seq: string }>`select current_setting('plan_cache_mode') as mode, current_setting('enable_seqscan') as seq`.execute(conn)).rows[0]);
    t.same(await settings(database.pacingDb), { mode: 'force_generic_plan', seq: 'off' }, 'the pacing pool');
    t.same(await settings(database.db), { mode: 'force_custom_plan', seq: 'on' }, "the routes' pool");
  });
}

for (const state of SERVER_URL ? STATISTICS_STATES : []) {
  // Analysed, the plans are made again after the growth (an analyze invalidates them); in the other
  // states the plans made on the small tables are the ones that run on the large.
  t.test(`a forward's statements, run on a pacing connection, look up by index on small and large tables (${state})`, async (t) => {
    const database = await freshDatabase(t, { queryTimeoutMs: SET_UP_QUERY_TIMEOUT_MS });
    const { db } = database;
    await prepare(db, state);
    await sql`insert into provider_slots (slot) select generate_series(0, 4)`.execute(db);
    await grow(db, state, 's', SMALL);
    await queued(db, 'qs-', 50);
    // One pacing connection throughout: its plans, made on the small tables, are the ones measured on the large.
    const [small, large] = await database.pacingDb.connection().execute(async (conn) => {
      const small = await forward(conn, 's', 5);
      await grow(db, state, 'l', LARGE);
      await queued(db, 'ql-', 1_000);
      // As many slots as PROVIDER_MAX_IN_FLIGHT may ask for (the take reads them by primary key).
      await sql`insert into provider_slots (slot) select generate_series(5, 9999)`.execute(db);
      const large = await forward(conn, 'l', 10_000);
      const { rows } = await sql<{ custom: number }>`select coalesce(sum(custom_plans), 0)::int as custom from pg_prepared_statements where name like '%_paced'`.execute(conn);
      t.equal(rows[0]!.custom, 0, 'every execution ran the plan made once (no custom plan)');
      return [small, large];
    });
    for (const name of PACED_STATEMENTS) {
      const s = small.get(name)!;
      const l = large.get(name)!;
      for (const { plan } of [s, l]) t.notMatch(plan, /Seq Scan/, `${name}: no sequential scan`, { plan });
      if (ONCE_PER_PROCESS.includes(name)) continue;
      // A handful of pages on the small tables: a B-tree grown a level deeper, and the visibility
      // map an index-only scan reads, add a few pages that no ratio of so few allows (any_queued: 2 then 6).
      t.ok(l.blocks <= FLAT * s.blocks + 4, `${name}: buffers flat, ${s.blocks} at ${SMALL * 2} requests, ${l.blocks} at ${(SMALL + LARGE) * 2}`, { plan: l.plan });
    }
    t.match(large.get('claim_next_queued')!.plan, /Index Scan using underwriting_requests_queue on underwriting_requests/, "the claim walks the queue's index", { plan: large.get('claim_next_queued')!.plan });
    t.match(large.get('mark_forwarded')!.plan, /Index Scan using underwriting_requests_pkey on underwriting_requests/, 'the outcome by primary key', { plan: large.get('mark_forwarded')!.plan });
  });
}
