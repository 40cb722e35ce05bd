import type pg from 'pg';
import { openDatabase } from '../../src/db/database.js';
import { purgeRequestBatch } from '../../src/retention/sweep.js';
import type { Goal } from './report.js';
import { cpfOf } from './states.js';

// Issue 34: "at 1M stored requests every statement finishes far inside its timeout in every state
// (sweep batch <= 1 s)". After a bench state's callback runs, with the state's gateway still up
// (its connections as old as the state's: in state b, from go-live), each per-request or per-batch
// statement is run a few times as a client or the sweep runs it, and timed: through the API for
// the routes (the answer's time, HTTP included), through the sweep's own function for a retention
// batch. A timing is a latency on whatever host runs it; the goal is a bound far from it.

/** How often each is run; the slowest run is judged. */
const RUNS = 3;
/** Far inside the database's statement timeout (15 s): the bound the issue gives the sweep batch. */
export const STATEMENT_BOUND_MS = 1000;

export interface StatementTiming {
  name: string;
  ms: number[];
  /** Answers that were not 2xx (each run's status when it was not). */
  failures: string[];
}

interface Call {
  method: 'GET' | 'POST';
  path: string;
  body?: unknown;
  /** The personal-data routes' admin key (ADMIN_API_KEYS), as a bearer. */
  bearer?: string;
}

async function timed(baseUrl: string, call: Call): Promise<{ ms: number; status: number; body: unknown }> {
  const started = performance.now();
  const res = await fetch(`${baseUrl}${call.path}`, {
    method: call.method,
    headers: {
      ...(call.body === undefined ? {} : { 'content-type': 'application/json' }),
      ...(call.bearer === undefined ? {} : { authorization: `Bearer ${call.bearer}` }),
    },
    ...(call.body === undefined ? {} : { body: JSON.stringify(call.body) }),
  });
  const text = await res.text();
  const ms = performance.now() - started;
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { ms, status: res.status, body };
}

/** Customers with a completed request, newest first: the ones GET one and the erasure are timed on. */
async function completedCustomers(pool: pg.Pool, count: number): Promise<string[]> {
  const { rows } = await pool.query<{ customer_uuid: string }>(
    `select customer_uuid from underwriting_requests where status = 'completed' order by id desc limit $1`,
    [count],
  );
  return rows.map((r) => r.customer_uuid);
}

/**
 * The statistics reads alone, once a state is loaded and before its runs add their own rows to the
 * current hour: what a deployment whose rows lie over weeks (their hours closed) pays.
 */
export async function timeStatistics(baseUrl: string, label: string): Promise<StatementTiming[]> {
  const timings: StatementTiming[] = [];
  for (const [name, path] of [['statistics (24 h by hour)', '/v1/stats'], ['statistics (30 days by day)', '/v1/stats?bucket=day']] as const) {
    const timing: StatementTiming = { name: `${name}, ${label}`, ms: [], failures: [] };
    for (let i = 0; i < RUNS; i++) {
      const { ms, status } = await timed(baseUrl, { method: 'GET', path });
      timing.ms.push(ms);
      if (status < 200 || status > 299) timing.failures.push(String(status));
    }
    timings.push(timing);
  }
  return timings;
}

export async function timeStatements(baseUrl: string, databaseUrl: string, pool: pg.Pool, prefix: string, adminKey: string): Promise<StatementTiming[]> {
  const timings: StatementTiming[] = [];
  const run = async (name: string, calls: Call[]) => {
    const timing: StatementTiming = { name, ms: [], failures: [] };
    for (const call of calls) {
      const { ms, status } = await timed(baseUrl, call);
      timing.ms.push(ms);
      if (status < 200 || status > 299) timing.failures.push(String(status));
    }
    timings.push(timing);
  };
  const customers = await completedCustomers(pool, RUNS * 2);
  const times = <T>(f: (i: number) => T) => Array.from({ length: RUNS }, (_, i) => f(i));

  await run('submit (insert submitting, update submitted)', times((i) => ({
    method: 'POST',
    path: '/v1/underwritings',
    body: { customerUuid: `${prefix}stmt-${i}`, cpf: cpfOf(900_000 + i), costSavingEnabled: false },
  })));
  await run('GET one customer', times((i) => ({ method: 'GET', path: `/v1/underwritings/${encodeURIComponent(customers[i % customers.length]!)}` })));
  await run('list page (newest 50)', times(() => ({ method: 'GET', path: '/v1/underwritings?limit=50' })));
  // The second page of a common status: the shape issue 34 found reading every match.
  const first = await timed(baseUrl, { method: 'GET', path: '/v1/underwritings?status=completed&limit=50' });
  const cursor = (first.body as { nextCursor?: string | null } | undefined)?.nextCursor;
  await run('list page (completed, second page)', times(() => ({
    method: 'GET',
    path: `/v1/underwritings?status=completed&limit=50${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
  })));
  await run('lookup by CPF', times((i) => ({ method: 'POST', path: '/v1/underwritings/lookup', body: { cpf: cpfOf(i + 7) } })));
  await run('feed page (oldest 100)', times(() => ({ method: 'GET', path: '/v1/events?limit=100' })));
  await run('feed page (underwriting.completed)', times(() => ({ method: 'GET', path: '/v1/events?limit=100&type=underwriting.completed' })));
  await run('statistics (24 h by hour)', times(() => ({ method: 'GET', path: '/v1/stats' })));
  await run('statistics (30 days by day)', times(() => ({ method: 'GET', path: '/v1/stats?bucket=day' })));
  await run('erasure of one customer', times((i) => ({
    method: 'POST',
    path: '/v1/personal-data/erase',
    body: { customerUuid: customers[RUNS + (i % Math.max(1, customers.length - RUNS))] ?? customers[0] },
    bearer: adminKey,
  })));

  // A retention batch of 500 (the sweep's default), the oldest settled requests with their
  // callbacks, events and deliveries, as the sweep's own function runs it.
  const handle = await openDatabase({ databaseUrl, dataDir: 'memory://', poolSize: 1 });
  try {
    const timing: StatementTiming = { name: 'retention batch (500 requests and dependants)', ms: [], failures: [] };
    for (let i = 0; i < RUNS; i++) {
      const started = performance.now();
      const purged = await purgeRequestBatch(handle.db, new Date(Date.now() + 60_000), 500);
      timing.ms.push(performance.now() - started);
      if (purged.underwriting_requests === 0) timing.failures.push('nothing purged');
    }
    timings.push(timing);
  } finally {
    await handle.close();
  }
  return timings;
}

export function statementLines(timings: readonly StatementTiming[]): string[] {
  return timings.map((t) => `${t.name}: ${t.ms.map((ms) => ms.toFixed(1)).join(', ')} ms${t.failures.length > 0 ? ` (not 2xx: ${t.failures.join(', ')})` : ''}`);
}

export function statementGoals(timings: readonly StatementTiming[]): Goal[] {
  return timings.map((t) => {
    const worst = Math.max(...t.ms);
    return {
      goal: `${t.name} <= ${STATEMENT_BOUND_MS} ms, every run 2xx`,
      measured: `${worst.toFixed(1)} ms${t.failures.length > 0 ? `; ${t.failures.length} failed (${t.failures.join(', ')})` : ''}`,
      met: worst <= STATEMENT_BOUND_MS && t.failures.length === 0,
    };
  });
}
