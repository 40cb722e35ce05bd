import pg from 'pg';
import { cpuTimeMs } from './processes.js';
import { openDatabase } from '../../src/db/database.js';
import { migrateToLatest } from '../../src/db/migrator.js';

// A throwaway database on the server named by DATABASE_URL: created, migrated with the project's
// own migrations, seeded with plain SQL, and dropped at the end.

export interface BenchDatabase {
  url: string;
  name: string;
  pool: pg.Pool;
  serverVersion: string;
  drop(): Promise<void>;
}

export async function createBenchDatabase(adminUrl: string): Promise<BenchDatabase> {
  const name = `ugw_bench_${process.pid}_${Date.now()}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const database = await openDatabase({ databaseUrl: url.toString(), dataDir: 'memory://', poolSize: 1 });
  try {
    await migrateToLatest(database);
  } finally {
    await database.close();
  }
  const pool = new pg.Pool({ connectionString: url.toString(), max: 2 });
  pool.on('error', () => undefined);
  const version = await pool.query<{ version: string }>('select version()');
  let dropped = false;
  return {
    url: url.toString(),
    name,
    pool,
    serverVersion: version.rows[0]?.version ?? 'unknown',
    drop: async () => {
      if (dropped) return;
      dropped = true;
      await pool.end().catch(() => undefined);
      const client = new pg.Client({ connectionString: adminUrl });
      await client.connect();
      try {
        await client.query(`drop database if exists ${name} with (force)`);
      } finally {
        await client.end();
      }
    },
  };
}

const ISO = `'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'`;

/** `count` requests awaiting their callback: customers `${prefix}0` .. `${prefix}${count - 1}`. */
export async function seedSubmitted(pool: pg.Pool, prefix: string, count: number): Promise<void> {
  await pool.query(
    `insert into underwriting_requests (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, status, upstream_status)
     select $1 || g, md5($1 || g), '***.456.789-**', false, 'submitted', 202 from generate_series(0, $2 - 1) g`,
    [prefix, count],
  );
  await pool.query('analyze underwriting_requests');
  await flushWrites(pool);
}

let flushRefused = false;

/**
 * A CHECKPOINT, untimed: every page the seeding (and any earlier run) dirtied is written and
 * fsynced now, so that the kernel does not write it back during the next measured run. Seeding
 * 40-60k rows per run left ~160 MB of dirty pages for the kernel to write back 30 s later: at that
 * moment every commit's WAL flush queued behind the burst (vmstat: bo 161 MB/s, wa 29%) and
 * batches of callbacks took 150-190 ms instead of 5-15. Skipped, once said, where the role may
 * not checkpoint.
 */
export async function flushWrites(pool: pg.Pool): Promise<void> {
  if (flushRefused) return;
  try {
    await pool.query('checkpoint');
  } catch (err) {
    flushRefused = true;
    process.stdout.write(`(no CHECKPOINT between runs: ${(err as Error).message}; the kernel's writeback of seeded rows may stall a run)\n`);
  }
}

/**
 * `filler` finished requests of other customers, then `customers` customers `${prefix}N` with
 * `perCustomer` completed requests each, every one with its matched callback.
 */
export async function seedHistory(
  pool: pg.Pool,
  options: { filler: number; prefix: string; customers: number; perCustomer: number },
): Promise<void> {
  await pool.query(
    `insert into underwriting_requests (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, status, upstream_status,
                                        upstream_error, submitted_at, updated_at)
     select 'filler-' || (g % 40000), md5('filler' || g), '***.456.789-**', g % 2 = 0,
            case when g % 5 = 0 then 'submit_failed' else 'expired' end,
            case when g % 5 = 0 then 500 else 202 end,
            case when g % 5 = 0 then 'provider said no' end,
            now() - make_interval(secs => g), now() - make_interval(secs => g)
     from generate_series(1, $1) g`,
    [options.filler],
  );
  await pool.query(
    `insert into underwriting_requests (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, srd, status,
                                        upstream_status, submitted_at, updated_at, completed_at, decision)
     select $1 || c, md5($1 || c), '***.456.789-**', false,
            '{"grossIncome": 8500, "occupation": "Retired", "address": {"city": "Recife", "state": "PE"}}'::jsonb,
            'completed', 202, now() - make_interval(hours => k), now() - make_interval(hours => k),
            now() - make_interval(hours => k) + interval '10 seconds', 'approved'
     from generate_series(0, $2 - 1) c, generate_series(1, $3) k`,
    [options.prefix, options.customers, options.perCustomer],
  );
  await pool.query(
    `insert into callbacks (peer, raw_body, outcome, customer_uuid, started, finished, body, decision, request_id)
     select '127.0.0.1', convert_to(b::text, 'UTF8'), 'matched', customer_uuid, s, f, b, 'approved', id
     from (
       select id, customer_uuid, submitted_at + interval '1 second' as s, submitted_at + interval '9 seconds' as f,
              jsonb_build_object(
                'customerUuid', customer_uuid,
                'started', to_char((submitted_at + interval '1 second') at time zone 'UTC', ${ISO}),
                'finished', to_char((submitted_at + interval '9 seconds') at time zone 'UTC', ${ISO}),
                'serviceType', 'CREDIT_SCORE',
                'response', jsonb_build_object('costSavingEnabled', false, 'score', 712, 'riskBand', 2, 'limit', 4500)
              ) as b
       from underwriting_requests where customer_uuid like $1 || '%'
     ) x`,
    [options.prefix],
  );
  await pool.query(
    `update underwriting_requests r set result_callback_id = c.id from callbacks c
     where c.request_id = r.id and r.customer_uuid like $1 || '%'`,
    [options.prefix],
  );
  await pool.query('vacuum analyze underwriting_requests');
  await pool.query('vacuum analyze callbacks');
  await flushWrites(pool);
}

/**
 * The gateway's backends: its pools' and its LISTEN connection's (which receives every NOTIFY,
 * its own included).
 */
export const GATEWAY_APPLICATIONS = ['underwriting-gateway', 'underwriting-gateway-listener'];

/** CPU used so far by each PostgreSQL backend serving these applications in this database, by pid. */
export async function backendCpuSnapshot(database: Pick<BenchDatabase, 'pool' | 'name'>, applicationNames: readonly string[]): Promise<Map<number, number> | null> {
  const { rows } = await database.pool.query<{ pid: number }>(
    'select pid from pg_stat_activity where datname = $1 and application_name = any($2::text[])',
    [database.name, applicationNames],
  );
  const snapshot = new Map<number, number>();
  for (const { pid } of rows) {
    const ms = cpuTimeMs(pid);
    if (ms === null) return null;
    snapshot.set(pid, ms);
  }
  return snapshot;
}

/**
 * CPU the backends of `after` used since `before`; a backend connected meanwhile counts whole
 * (pools open and close connections between runs). One that disconnected meanwhile is lost.
 */
export function backendCpuBetween(before: Map<number, number> | null, after: Map<number, number> | null): number | null {
  if (before === null || after === null || after.size === 0) return null;
  let total = 0;
  for (const [pid, ms] of after) total += ms - (before.get(pid) ?? 0);
  return total;
}

/** A statement's totals so far (pg_stat_statements). */
export interface StatementTotals {
  calls: number;
  execMs: number;
  /** Shared buffers it read or found in the cache. */
  blocks: number;
}

/** What one statement cost during a run: most execution time first (`busiestStatements`). */
export interface BusyStatement extends StatementTotals {
  query: string;
}

const withStatements = new WeakSet<pg.Pool>();

// The harness's own reads, left out of a run's statements.
const HARNESS_STATEMENTS = /pg_stat_statements|pg_stat_activity|pg_current_wal_lsn|pg_stat_bgwriter|pg_stat_checkpointer/;

/**
 * Each statement's totals so far in this database, by its text (`--own-postgres`, where
 * pg_stat_statements is preloaded). Only one target is loaded at a time, so what changes during a
 * run is mostly that target's work; but a gateway that pushes keeps draining its deliveries during
 * the baseline's run, and those statements are counted there.
 */
export async function statementTotals(pool: pg.Pool): Promise<Map<string, StatementTotals>> {
  // The view exists in a database once the extension is created there.
  if (!withStatements.has(pool)) {
    await pool.query('create extension if not exists pg_stat_statements');
    withStatements.add(pool);
  }
  const { rows } = await pool.query<{ query: string; calls: number; exec_ms: number; blocks: number }>(
    `select query, sum(calls)::float8 as calls, sum(total_exec_time)::float8 as exec_ms,
            sum(shared_blks_hit + shared_blks_read)::float8 as blocks
     from pg_stat_statements where dbid = (select oid from pg_database where datname = current_database())
     group by query`,
  );
  return new Map(rows.filter((r) => !HARNESS_STATEMENTS.test(r.query)).map((r) => [r.query, { calls: r.calls, execMs: r.exec_ms, blocks: r.blocks }]));
}

/** The `top` statements that took the most execution time between two snapshots (new ones count whole). */
export function busiestStatements(before: Map<string, StatementTotals>, after: Map<string, StatementTotals>, top: number): BusyStatement[] {
  const changed: BusyStatement[] = [];
  for (const [query, a] of after) {
    const b = before.get(query) ?? { calls: 0, execMs: 0, blocks: 0 };
    if (a.calls > b.calls) changed.push({ query, calls: a.calls - b.calls, execMs: a.execMs - b.execMs, blocks: a.blocks - b.blocks });
  }
  return changed.sort((x, y) => y.execMs - x.execMs).slice(0, top);
}

/** One line of a run's statement: total and per call, and the start of its text. */
export function describeStatement(s: BusyStatement): string {
  const per = (v: number) => Math.round((v / s.calls) * 1000) / 1000;
  const text = s.query.replace(/\s+/g, ' ').trim().slice(0, 90);
  return `${Math.round(s.execMs)} ms in ${s.calls} calls (${per(s.execMs)} ms, ${Math.round(s.blocks / s.calls)} blocks each): ${text}`;
}
