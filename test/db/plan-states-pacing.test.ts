import { type Kysely, sql } from 'kysely';
import type { Tables } from '../../src/db/types.js';
import { definedStatements } from '../../src/db/statements.js';
import '../../src/provider/sql.js';
import '../../src/requests/sql.js';
import '../../src/submissions/queue.js';
import t from 'tap';
import { freshDatabase, SERVER_URL } from '../helpers/database.js';
import { FLAT, grow, inline, LARGE, measure, type Measured, PLAN_STATES_FILE_TIMEOUT_MS, prepare, SET_UP_QUERY_TIMEOUT_MS, SMALL, STATISTICS_STATES } from '../helpers/statement-cost.js';

t.setTimeout(PLAN_STATES_FILE_TIMEOUT_MS);

// Issue 34 and 37: the provider pace's statements and the forwarder's run per forwarded request, on
// the pacing pool (DatabaseHandle.pacingDb), whose connections plan each statement once and keep
// that plan for their whole life (PLANS_MADE_ONCE). A plan made while the tables were tiny must
// still look up by index once they have grown. Buffers, not timings (docs/performance.md).

/** Each statement of a forward, with its parameters; `$id` is a request the transaction made `submitting`. */
const FORWARD = (id: number, now: string): Array<[string, unknown[]]> => [
  ['any_queued', []],
  ['provider_take_slot', [200, 5, 5, 'holder-1', 10_000, 1]],
  ['claim_next_queued', [now, 0]],
  ['mark_forwarded', [202, now, id, 0, 'holder-1']],
  ['mark_submit_failed', [503, 'did not answer', now, id]],
  ['return_to_queue', [id, '\\x00', now, 503, 'refused', true]],
  ['provider_return_slot', [0, 'holder-1', 'failed', false, 5, 30, 1]],
];

const textOf = new Map(definedStatements().map(({ statement }) => [statement.name, statement.text]));

/** `n` queued requests of `prefix`'s customers (a campaign's, waiting for the provider's pace). */
async function queued(db: Kysely<Tables>, prefix: string, n: number): Promise<void> {
  await sql`
    insert into underwriting_requests (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, status, submitted_at, updated_at, queued_at, queued_body)
    select ${prefix} || g, md5(${prefix} || g), '***.456.789-**', false, 'queued', now(), now(), now(), '\\x00'::bytea
      from generate_series(1, ${n}::int) g`.execute(db);
}

/** Every statement of a forward, each as an EXECUTE of the connection's prepared statement (prepared here the first time). */
async function forward(conn: Kysely<Tables>, prefix: string): Promise<Map<string, Measured>> {
  const { rows } = await sql<{ id: number }>`
    select id from underwriting_requests where customer_uuid like ${prefix + '%'} and status = 'submitted' order by id desc limit 1`.execute(conn);
  const id = Number(rows[0]!.id);
  const measured = new Map<string, Measured>();
  for (const [name, parameters] of FORWARD(id, new Date().toISOString())) {
    const prepared = `${name}_paced`;
    const { rows: known } = await sql`select 1 from pg_prepared_statements where name = ${prepared}`.execute(conn);
    if (known.length === 0) await sql.raw(`prepare ${prepared} as ${textOf.get(name)!}`).execute(conn);
    const execute = parameters.length === 0 ? `execute ${prepared}` : `execute ${prepared}${inline(`(${parameters.map((_, i) => `$${i + 1}`).join(', ')})`, parameters)}`;
    // The request is being sent (it was queued), as when its outcome is written (rolled back with the measurement).
    measured.set(name, await measure(conn, execute, `update underwriting_requests set status = 'submitting', queued_at = submitted_at where id = ${id}`));
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
  t.test(`a forward's statements, planned on a pacing connection while the tables were small, look up by index once they grew (${state})`, async (t) => {
    const database = await freshDatabase(t, { queryTimeoutMs: SET_UP_QUERY_TIMEOUT_MS });
    const { db } = database;
    await prepare(db, state);
    await sql`insert into provider_slots (slot) select generate_series(0, 4)`.execute(db);
    await grow(db, state, 's', SMALL);
    await queued(db, 'qs-', 50);
    // One pacing connection throughout: its plans, made on the small tables, are the ones measured on the large.
    const [small, large] = await database.pacingDb.connection().execute(async (conn) => {
      const small = await forward(conn, 's');
      await grow(db, state, 'l', LARGE);
      await queued(db, 'ql-', 1_000);
      const large = await forward(conn, 'l');
      const { rows } = await sql<{ custom: number }>`select coalesce(sum(custom_plans), 0)::int as custom from pg_prepared_statements where name like '%_paced'`.execute(conn);
      t.equal(rows[0]!.custom, 0, 'every execution ran the plan made once (no custom plan)');
      return [small, large];
    });
    for (const [name] of FORWARD(0, '')) {
      const s = small.get(name)!;
      const l = large.get(name)!;
      for (const { plan } of [s, l]) t.notMatch(plan, /Seq Scan/, `${name}: no sequential scan`, { plan });
      t.ok(l.blocks <= FLAT * s.blocks + 2, `${name}: buffers flat, ${s.blocks} at ${SMALL * 2} requests, ${l.blocks} at ${(SMALL + LARGE) * 2}`, { plan: l.plan });
    }
    t.match(large.get('claim_next_queued')!.plan, /Index Scan using underwriting_requests_queue on underwriting_requests/, "the claim walks the queue's index", { plan: large.get('claim_next_queued')!.plan });
    t.match(large.get('mark_forwarded')!.plan, /Index Scan using underwriting_requests_pkey on underwriting_requests/, 'the outcome by primary key', { plan: large.get('mark_forwarded')!.plan });
  });
}
