import { type Kysely, sql } from 'kysely';
import { STATEMENT_PLANNED_ONCE } from '../../src/db/plan-guards.js';
import type { Tables } from '../../src/db/types.js';
import { RECORD_RESULTS, recordResultsParameters, type ValidResult } from '../../src/requests/complete.js';

/**
 * The query timeout of a plan test's database: seeding a table of 100k-1M rows took more than the
 * gateway's 15 s on a host running both suites at once (a .ci/run at load 8-10: "Query read
 * timeout" in seedRequests). The tests measure plans and buffers, never time.
 */
export const SET_UP_QUERY_TIMEOUT_MS = 600_000;

/**
 * A plan-states file's time limit (t.setTimeout at its top): three states of tens of thousands of
 * rows each took 50-60 s alone on a quiet 2-core host, and past the suite's 120 s per file then (three
 * files timed out) in a CI run at load with both suites and the container build beside them.
 */
export const PLAN_STATES_FILE_TIMEOUT_MS = 480_000;

/** The statistics states a deployment's tables go through (issue 34). */
export type StatisticsState = 'never analysed' | 'analysed empty, then grown' | 'analysed';
export const STATISTICS_STATES: readonly StatisticsState[] = ['never analysed', 'analysed empty, then grown', 'analysed'];

const TABLES = ['underwriting_requests', 'callbacks', 'events', 'event_deliveries', 'idempotency_keys', 'event_dispatch'];

/** Nothing analyses or vacuums behind the test's back: the state is the one the test set. */
export async function holdStatistics(db: Kysely<Tables>): Promise<void> {
  for (const table of TABLES) await sql`alter table ${sql.table(table)} set (autovacuum_enabled = off)`.execute(db);
}

export async function analyseAll(db: Kysely<Tables>): Promise<void> {
  for (const table of TABLES) await sql`analyze ${sql.table(table)}`.execute(db);
}

/**
 * `customers * per` requests over customers `${prefix}0..`, with the row versions the API leaves:
 * each customer's newest inserted `submitting` then updated `submitted` (waiting for its result);
 * its older ones (`per - 1`) completed by a matched callback, with their completed events. Each
 * round of submits is newer than the one before, each request a millisecond after the previous
 * customer's (as a campaign submits them): the newest are the waiting ones. Submitted `daysAgo` days ago.
 */
export async function seedRequests(db: Kysely<Tables>, prefix: string, customers: number, per = 1, daysAgo = 1): Promise<void> {
  // Set-up, not measured: no statement timeout (a busy host took more than the gateway's 15 s).
  await db.transaction().execute(async (trx) => {
    await sql`set local statement_timeout = 0`.execute(trx);
    await sql`
      insert into underwriting_requests (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, srd, status, submitted_at, updated_at)
      select ${prefix} || c, md5(${prefix} || c), '***.456.789-**', false,
             '{"grossIncome": 5000, "occupation": "SALARIED", "address": {"city": "São Paulo", "zipCode": "01000-000"}}'::jsonb,
             case when k = ${per}::int then 'submitting' else 'expired' end,
             now() - ${daysAgo}::int * interval '1 day' + k * interval '1 minute' + c * interval '1 millisecond',
             now() - ${daysAgo}::int * interval '1 day' + k * interval '1 minute' + c * interval '1 millisecond'
        from generate_series(0, ${customers}::int - 1) c, generate_series(1, ${per}::int) k
       order by k, c`.execute(trx);
    await sql`update underwriting_requests set status = 'submitted', upstream_status = 202
               where customer_uuid like ${prefix + '%'} and status = 'submitting'`.execute(trx);
  });
  if (per < 2) return;
  // The older ones answered: a matched callback, the request completed, its event. Joined by hash:
  // without statistics the planner may loop over every request per callback (a seeding that timed out).
  await db.transaction().execute(async (trx) => {
    await sql`set local enable_nestloop = off`.execute(trx);
    await sql`set local statement_timeout = 0`.execute(trx);
    await sql`
    with older as (
      select id, customer_uuid, submitted_at from (
        select id, customer_uuid, submitted_at, row_number() over (partition by customer_uuid order by id desc) as nth
          from underwriting_requests where customer_uuid like ${prefix + '%'}) x
       where nth > 1
    ),
    cb as (
      insert into callbacks (received_at, raw_body, outcome, customer_uuid, started, finished, body, decision, request_id)
      select o.submitted_at + interval '10 s', '\\x7b7d'::bytea, 'matched', o.customer_uuid, o.submitted_at + interval '1 s',
             o.submitted_at + interval '2 s', '{"response": {"score": 700}}'::jsonb, 'approved', o.id
        from older o
      returning id, request_id, received_at, customer_uuid
    ),
    done as (
      update underwriting_requests r set status = 'completed', decision = 'approved', completed_at = cb.received_at,
             updated_at = cb.received_at, result_callback_id = cb.id
        from cb where r.id = cb.request_id
      returning r.id
    )
    insert into events (public_id, type, customer_uuid, created_at, request_id, callback_id, data)
    select 'evt_' || replace(gen_random_uuid()::text, '-', ''), 'underwriting.completed', cb.customer_uuid, cb.received_at,
           cb.request_id, cb.id, '{}'::jsonb
      from cb`.execute(trx);
  });
}

/** One valid result for `customerUuid`, `started` a few seconds before now as a provider sends it. */
export function resultFor(customerUuid: string, n = 0): ValidResult {
  const started = new Date(Date.now() - 5_000 + n);
  return {
    receivedAt: new Date(),
    peer: '127.0.0.1',
    rawBody: Buffer.from(`{"customerUuid":"${customerUuid}"}`),
    customerUuid,
    started: started.toISOString(),
    finished: new Date(started.getTime() + 1000).toISOString(),
    body: '{"response": {"score": 700, "limit": 1000}}',
    decision: 'approved',
  };
}

/** A PostgreSQL literal of a test's own parameter (strings, numbers, Dates, arrays of those). */
function literal(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (Array.isArray(value)) return `array[${value.map(literal).join(', ')}]`;
  if (value instanceof Date) return `'${value.toISOString()}'`;
  return `'${String(value).replace(/'/g, "''")}'`;
}

/** A statement's text with its parameters written in as literals (a custom plan, as the gateway's connections plan it). */
export function inline(text: string, parameters: readonly unknown[]): string {
  return text.replace(/\$(\d+)/g, (_, n: string) => literal(parameters[Number(n) - 1]));
}

export interface Measured {
  /** Buffers (shared hit + read) the statement touched in the database's own relations, foreign-key checks included. */
  blocks: number;
  /** The plan it ran, as text. */
  plan: string;
}

/**
 * Runs `run` (SQL text) once on this connection inside a transaction that is rolled back, and
 * counts the buffers it touched in the public schema's tables and indexes: the
 * pg_stat_get_xact_blocks_* functions count this transaction's own, foreign-key checks and
 * cascades included (EXPLAIN's per-node buffers leave those out). An EXECUTE of a prepared
 * statement runs the plan that connection cached. `setup` runs first in the transaction (a SET LOCAL).
 */
export async function measure(conn: Kysely<Tables>, run: string, setup?: string): Promise<Measured> {
  const touched = sql<{ n: string }>`
    select coalesce(sum(pg_stat_get_xact_blocks_fetched(c.oid)), 0)::text as n
      from pg_class c where c.relnamespace = 'public'::regnamespace`;
  await sql`begin`.execute(conn);
  try {
    if (setup !== undefined) await sql.raw(setup).execute(conn);
    const before = Number((await touched.execute(conn)).rows[0]!.n);
    const { rows } = await sql.raw<{ 'QUERY PLAN': string }>(`explain (analyze, costs off, timing off, summary off) ${run}`).execute(conn);
    const after = Number((await touched.execute(conn)).rows[0]!.n);
    return { blocks: after - before, plan: rows.map((r) => r['QUERY PLAN']).join('\n') };
  } finally {
    await sql`rollback`.execute(conn);
  }
}

export interface MeasuredWork {
  /** Buffers touched in the public schema's tables and indexes, as measure() counts them. */
  blocks: number;
  /** Sequential scans per table the work started. */
  seqScans: Record<string, number>;
}

/**
 * Runs `work` (several statements, as a service runs them) on this connection inside a transaction
 * that is rolled back, counting its buffers as measure() does and the sequential scans it started
 * per table (pg_stat_xact_user_tables): the plan shape of work that no single EXPLAIN shows.
 */
export async function measureWork(conn: Kysely<Tables>, work: (conn: Kysely<Tables>) => Promise<unknown>): Promise<MeasuredWork> {
  const counters = sql<{ relname: string; blocks: string; seq: string }>`
    select c.relname, pg_stat_get_xact_blocks_fetched(c.oid)::text as blocks,
           coalesce(t.seq_scan, 0)::text as seq
      from pg_class c left join pg_stat_xact_user_tables t on t.relid = c.oid
     where c.relnamespace = 'public'::regnamespace`;
  const read = async () => new Map((await counters.execute(conn)).rows.map((r) => [r.relname, { blocks: Number(r.blocks), seq: Number(r.seq) }]));
  await sql`begin`.execute(conn);
  try {
    const before = await read();
    await work(conn);
    const after = await read();
    let blocks = 0;
    const seqScans: Record<string, number> = {};
    for (const [name, a] of after) {
      const b = before.get(name) ?? { blocks: 0, seq: 0 };
      blocks += a.blocks - b.blocks;
      if (a.seq > b.seq) seqScans[name] = a.seq - b.seq;
    }
    return { blocks, seqScans };
  } finally {
    await sql`rollback`.execute(conn);
  }
}

/** The callback statement's parameters for a batch, in the order recordResults writes it. */
export function recordResultsBatch(batch: readonly ValidResult[], skewS = 300): unknown[] {
  return recordResultsParameters([...batch].sort((a, b) => (a.customerUuid < b.customerUuid ? -1 : 1)), { skewS });
}

/** What the plan tests prepare the callback statement as: not the gateway's own name, which node-pg prepares itself. */
const MEASURED_RECORD_RESULTS = 'record_results_measured';

/**
 * The callback statement for a batch as the gateway runs it (recordResults): prepared on this
 * connection (once: its generic plan is kept, as the gateway's is) and executed under
 * STATEMENT_PLANNED_ONCE, so that it runs the plan the connection made once and keeps.
 */
export async function measureRecordResults(conn: Kysely<Tables>, batch: readonly ValidResult[]): Promise<Measured> {
  const { rows } = await sql`select 1 from pg_prepared_statements where name = ${MEASURED_RECORD_RESULTS}`.execute(conn);
  if (rows.length === 0) await sql.raw(`prepare ${MEASURED_RECORD_RESULTS} as ${RECORD_RESULTS.text}`).execute(conn);
  const execute = `execute ${MEASURED_RECORD_RESULTS}(${recordResultsBatch(batch).map(literal).join(', ')})`;
  return measure(conn, execute, STATEMENT_PLANNED_ONCE);
}

/** The callback statement for a batch as an EXECUTE of the connection's prepared record_results. */
export function executeRecordResults(batch: readonly ValidResult[], skewS = 300): string {
  return `execute ${RECORD_RESULTS.name}(${recordResultsBatch(batch, skewS).map(literal).join(', ')})`;
}

// What the plan tests (test/db/plan-states-*.test.ts) share.

export const SMALL = 500;
export const LARGE = 10_000;
/** How much more a result may cost on the large table: a B-tree a level deeper, not a scan. */
export const FLAT = 1.5;

/** A fresh database in `state`'s statistics, grown to `customers` (2 requests each: one completed, one waiting). */
export async function grow(db: Kysely<Tables>, state: StatisticsState, prefix: string, customers: number): Promise<void> {
  await seedRequests(db, prefix, customers, 2);
  if (state === 'analysed') await analyseAll(db);
}

export async function prepare(db: Kysely<Tables>, state: StatisticsState): Promise<void> {
  await holdStatistics(db);
  if (state === 'analysed empty, then grown') await analyseAll(db);
}

/** A delivery to one target for every event (delivered), as a pushing gateway leaves them. */
export async function deliverAll(db: Kysely<Tables>): Promise<void> {
  await sql`insert into event_deliveries (event_id, customer_uuid, url_key, url, status, queued_at, next_attempt_at, delivered_at)
            select e.id, e.customer_uuid, 'k', 'http://127.0.0.1/', 'delivered', e.created_at, e.created_at, e.created_at
              from events e where not exists (select 1 from event_deliveries d where d.event_id = e.id)`.execute(db);
}

export const batchOf = (prefix: string, from: number, n: number) => Array.from({ length: n }, (_, i) => resultFor(`${prefix}${from + i * 3}`, i));
