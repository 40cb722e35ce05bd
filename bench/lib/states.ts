import type pg from 'pg';
import { closingPass } from '../../src/aggregates/closing.js';
import { openDatabase } from '../../src/db/database.js';
import { runLoad } from './load.js';

// The states a deployment's database goes through (issue 34), in which the callback A/B runs:
// (a) requests written through the gateway's submit API with full srd, never analysed;
// (b) tables analysed while empty (go-live), then grown by submits and callbacks;
// (c) analysed and vacuumed after loading;
// (d) a private cluster with autovacuum on, default settings.
// The harness runs no CHECKPOINT and no ANALYZE except where a state says so.

export type BenchState = 'a' | 'b' | 'c' | 'd';

export const STATE_NAMES: Record<BenchState, string> = {
  a: 'submitted through the API, never analysed',
  b: 'analysed while empty, then grown',
  c: 'vacuum analysed after loading',
  d: 'own cluster, autovacuum on',
};

export const SIZES: Record<string, number> = { '10k': 10_000, '100k': 100_000, '1m': 1_000_000 };

/** What `npm run bench` runs without --states / --sizes: a few minutes. */
export const DEFAULT_STATES: readonly BenchState[] = ['a', 'b'];
export const DEFAULT_SIZES: readonly string[] = ['10k'];

export interface StateRun {
  state: BenchState;
  size: string;
  requests: number;
}

/** --states=a,b and --sizes=10k,1m as the runs they ask for, each state at each size. */
export function stateRuns(statesArg: string | undefined, sizesArg: string | undefined): StateRun[] {
  const states = statesArg === undefined ? DEFAULT_STATES : statesArg.split(',').filter(Boolean);
  const sizes = sizesArg === undefined ? DEFAULT_SIZES : sizesArg.toLowerCase().split(',').filter(Boolean);
  for (const s of states) if (!(s in STATE_NAMES)) throw new Error(`--states: "${s}" is not one of a, b, c, d`);
  for (const s of sizes) if (!(s in SIZES)) throw new Error(`--sizes: "${s}" is not one of ${Object.keys(SIZES).join(', ')}`);
  return states.flatMap((state) => sizes.map((size) => ({ state: state as BenchState, size, requests: SIZES[size]! })));
}

const TABLES = ['underwriting_requests', 'callbacks', 'events', 'event_deliveries', 'idempotency_keys', 'event_dispatch'];

/** The state's statistics: nothing analyses behind its back (a, b, c), and go-live analysed the empty tables (b). */
export async function beforeLoading(pool: pg.Pool, state: BenchState): Promise<void> {
  if (state !== 'd') for (const table of TABLES) await pool.query(`alter table ${table} set (autovacuum_enabled = off)`);
  if (state === 'b') for (const table of TABLES) await pool.query(`analyze ${table}`);
}

/** After loading: (c) vacuum analyse; the others leave the tables as loading left them. */
export async function afterLoading(pool: pg.Pool, state: BenchState): Promise<void> {
  if (state === 'c') for (const table of TABLES) await pool.query(`vacuum analyze ${table}`);
}

/** Up to this many stored requests are written through the gateway's API; beyond, in bulk as the API leaves them. */
export const API_LOAD_LIMIT = 20_000;

const SRD = {
  grossIncome: 8500.5,
  housingSpends: 2100,
  cardSpends: 900,
  loanSpends: 0,
  address: { street: 'Rua das Flores', number: '42', complement: 'apto 3', city: 'São Paulo', state: 'SP' },
  occupation: 'Company Employee',
  desiredCreditLimit: 5000,
};
const SRD_JSON = JSON.stringify(SRD);

/** A valid CPF (check digits computed) for the n-th customer. */
export function cpfOf(n: number): string {
  const base = String(100_000_000 + (n % 899_999_999)).padStart(9, '0');
  const digit = (digits: string) => {
    const sum = [...digits].reduce((s, d, i) => s + Number(d) * (digits.length + 1 - i), 0);
    const r = (sum * 10) % 11;
    return r === 10 ? 0 : r;
  };
  const d1 = digit(base);
  return `${base}${d1}${digit(`${base}${d1}`)}`;
}

/** A provider result for `customerUuid`, `started` a few seconds before now, as a provider sends it. */
export function resultNow(customerUuid: string, n: number): string {
  const started = Date.now() - 3_000;
  return JSON.stringify({
    customerUuid,
    started: new Date(started).toISOString(),
    finished: new Date(started + 750).toISOString(),
    serviceType: 'CREDIT_SCORE',
    response: { costSavingEnabled: false, score: 300 + (n % 600), riskBand: 1 + (n % 5), limit: (n % 4) * 1500 },
  });
}

/**
 * `count` requests submitted through the gateway's API (full srd), then each one's result through
 * its callback API, 32 at a time: every row as the gateway writes it. Throws when a tenth fail.
 * `first`: the number of the first (its CPF and result), so that two loads have distinct CPFs.
 */
export async function loadThroughApi(baseUrl: string, prefix: string, count: number, first = 0): Promise<void> {
  const submits = await runLoad({
    baseUrl,
    connections: 32,
    durationS: 0,
    amount: count,
    build: (n) => ({
      method: 'POST',
      path: '/v1/underwritings',
      body: JSON.stringify({ customerUuid: `${prefix}${first + n}`, cpf: cpfOf(first + n), costSavingEnabled: false, srd: SRD }),
    }),
  });
  const results = await runLoad({
    baseUrl,
    connections: 32,
    durationS: 0,
    amount: count,
    build: (n) => ({ method: 'POST', path: '/v1/callbacks/underwriting', body: resultNow(`${prefix}${first + n}`, first + n) }),
  });
  for (const [what, r] of [['submits', submits], ['callbacks', results]] as const) {
    if (r.ok < count * 0.9) throw new Error(`loading through the API: ${r.ok} of ${count} ${what} answered 2xx (${JSON.stringify(r.statusCodes)})`);
  }
}

/**
 * Where a bulk load's rows lie in time: row k of `total` (from 0) was submitted `spreadS` x (1 - k /
 * total) seconds ago, so that they are spread evenly over the last spreadS seconds, the newest now.
 */
export interface Spread {
  spreadS: number;
  /** The first row's place among all the load's rows, and their number. */
  offset: number;
  total: number;
}

/** Stored requests, as a deployment that ran this long holds them: spread over the last 28 days. */
export const BULK_SPREAD_DAYS = 28;

/**
 * `count` requests waiting for their result, as a submit leaves them: inserted `submitting` (full
 * srd), then updated `submitted` (a dead tuple each); submitted now, or spread back in time. No
 * ANALYZE, no CHECKPOINT.
 */
export async function seedWaiting(pool: pg.Pool | pg.ClientBase, prefix: string, count: number, spread?: Spread): Promise<{ first: number; last: number }> {
  const { spreadS, offset, total } = spread ?? { spreadS: 0, offset: 0, total: 1 };
  const { rows } = await pool.query<{ first: string; last: string }>(
    `with inserted as (
       insert into underwriting_requests (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, srd, status, submitted_at, updated_at, x_request_id)
       select $1 || g, md5($1 || g), '***.456.789-**', false, $3::jsonb, 'submitting', t.at, t.at, md5(g::text)
         from generate_series(0, $2 - 1) g,
              lateral (select clock_timestamp() - make_interval(secs => $4::float8 * (1 - (g + $5)::float8 / $6)) as at) t
       returning id
     )
     select min(id)::text as first, max(id)::text as last from inserted`,
    [prefix, count, SRD_JSON, spreadS, offset, total],
  );
  const range = { first: Number(rows[0]!.first), last: Number(rows[0]!.last) };
  await pool.query(
    `update underwriting_requests set status = 'submitted', upstream_status = 202, updated_at = clock_timestamp()
      where id between $1 and $2 and status = 'submitting'`,
    [range.first, range.last],
  );
  return range;
}

/** An endpoint the gateway pushes to, as event_endpoints names it: its key and its URL as shown. */
export interface PushedEndpoint {
  key: string;
  url: string;
}

/** The endpoints configured by EVENT_WEBHOOK_URLS, once the gateway has started (it registers them). */
export async function configuredEndpoints(pool: pg.Pool): Promise<PushedEndpoint[]> {
  const { rows } = await pool.query<PushedEndpoint>(`select key, shown_url as url from event_endpoints where managed = 'config' order by key`);
  return rows;
}

/**
 * `count` stored requests in bulk, with the row versions and dead tuples the API leaves: each
 * submitted (two versions), then completed by its matched callback (a third), with its event;
 * spread evenly over the last spreadS seconds (0: all now). In chunks, so that no statement holds a
 * million rows; each chunk in one transaction, so that no other session sees its requests waiting:
 * a running gateway's expiry sweep expired the ones already older than the callback timeout between
 * the chunk's statements (bursts of 21-22 in a 1M load, 2026-12-02), and they were never completed.
 *
 * `pushedTo`: each event was pushed to these endpoints when it happened, as a gateway pushing all
 * along leaves it: a delivery written pending (leased, so that a running worker does not take it),
 * then delivered (a second version). Without it a push state's history would all be due at once: a
 * backlog of a million deliveries no deployment that pushed over weeks holds.
 */
export async function loadInBulk(pool: pg.Pool, prefix: string, count: number, spreadS = 0, pushedTo: readonly PushedEndpoint[] = []): Promise<void> {
  const CHUNK = 50_000;
  const client = await pool.connect();
  try {
    for (let from = 0; from < count; from += CHUNK) {
      await client.query('begin');
      try {
        await completeChunk(client, `${prefix}${from / CHUNK}-`, Math.min(CHUNK, count - from), { spreadS, offset: from, total: count }, pushedTo);
        await client.query('commit');
      } catch (err) {
        await client.query('rollback').catch(() => undefined);
        throw err;
      }
    }
  } finally {
    client.release();
  }
}

/** One chunk of loadInBulk: its requests submitted, each completed by its callback, with its event and deliveries. */
async function completeChunk(client: pg.ClientBase, prefix: string, count: number, spread: Spread, pushedTo: readonly PushedEndpoint[]): Promise<void> {
  const range = await seedWaiting(client, prefix, count, spread);
  await client.query(
    `with waiting as (
       select id, customer_uuid, submitted_at from underwriting_requests where id between $1 and $2 and status = 'submitted'
     ),
     cb as (
       insert into callbacks (received_at, peer, raw_body, outcome, customer_uuid, started, finished, body, decision, request_id)
       select w.submitted_at + interval '5 s', '127.0.0.1', convert_to(b::text, 'UTF8'), 'matched', w.customer_uuid,
              w.submitted_at + interval '1 s', w.submitted_at + interval '2 s', b, 'approved', w.id
         from waiting w,
              lateral (select jsonb_build_object('customerUuid', w.customer_uuid, 'serviceType', 'CREDIT_SCORE',
                         'response', jsonb_build_object('costSavingEnabled', false, 'score', 712, 'riskBand', 2, 'limit', 4500)) as b) x
       returning id, request_id, received_at, customer_uuid
     ),
     done as (
       update underwriting_requests r set status = 'completed', decision = 'approved', completed_at = cb.received_at,
              updated_at = cb.received_at, result_callback_id = cb.id
         from cb where r.id = cb.request_id
       returning r.id
     ),
     ev as (
       insert into events (public_id, type, customer_uuid, created_at, request_id, callback_id, data)
       select 'evt_' || replace(gen_random_uuid()::text, '-', ''), 'underwriting.completed', cb.customer_uuid, cb.received_at,
              cb.request_id, cb.id, jsonb_build_object('customerUuid', cb.customer_uuid, 'status', 'completed', 'decision', 'approved')
         from cb
       returning id, customer_uuid, created_at
     )
     insert into event_deliveries (event_id, customer_uuid, url_key, url, queued_at, next_attempt_at, lease_until, lease_token)
     select ev.id, ev.customer_uuid, t.key, t.url, ev.created_at, ev.created_at, now() + interval '1 hour', 'bench-load'
       from ev cross join unnest($3::text[], $4::text[]) as t(key, url)`,
    [range.first, range.last, pushedTo.map((e) => e.key), pushedTo.map((e) => e.url)],
  );
  if (pushedTo.length > 0) {
    await client.query(
      `update event_deliveries set status = 'delivered', attempts = 1, lease_until = null, lease_token = null,
              last_attempt_at = queued_at + interval '50 ms', last_status = 200, delivered_at = queued_at + interval '50 ms'
        where event_id in (select id from events where request_id between $1 and $2) and lease_token = 'bench-load'`,
      [range.first, range.last],
    );
  }
}

/**
 * Closes every past hour that can be closed (statistics_hourly), as the instances' closing passes
 * (src/aggregates/closing.ts, every minute) had done while a deployment's rows accumulated over
 * weeks: the gateway's own function, with no limit on hours per pass. Returns the hours closed.
 */
export async function closePastHours(databaseUrl: string): Promise<number> {
  const handle = await openDatabase({ databaseUrl, dataDir: 'memory://', poolSize: 1 });
  try {
    let closed = 0;
    for (;;) {
      const now = await closingPass(handle.db, new Date(), { maxHours: 1_000 });
      closed += now;
      if (now < 1_000) return closed;
    }
  } finally {
    await handle.close();
  }
}

/** Stored requests now. */
export async function storedRequests(pool: pg.Pool): Promise<number> {
  const { rows } = await pool.query<{ n: string }>('select count(*)::text as n from underwriting_requests');
  return Number(rows[0]?.n ?? 0);
}

/**
 * Shared buffers (hit + read) this database's backends have counted so far (pg_stat_database):
 * differences are what a run read and wrote, foreign-key checks and index maintenance included.
 * Backends report their counts when they go idle, within a second.
 */
export async function databaseBuffers(pool: pg.Pool): Promise<number> {
  const client = await pool.connect();
  try {
    await client.query('select pg_stat_clear_snapshot()');
    const { rows } = await client.query<{ n: string }>('select (blks_hit + blks_read)::text as n from pg_stat_database where datname = current_database()');
    return Number(rows[0]?.n ?? 0);
  } finally {
    client.release();
  }
}
