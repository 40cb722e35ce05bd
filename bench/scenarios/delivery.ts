import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';
import { type AbResult, type AbSettings, compareAb } from '../lib/compare.js';
import { type BenchDatabase, backendCpuSnapshot, flushWrites, GATEWAY_APPLICATIONS, seedSubmitted } from '../lib/database.js';
import type { Child } from '../lib/processes.js';
import { type Goal, verdict } from '../lib/report.js';
import { redactUrl } from '../../src/observability/logger.js';
import { callbackBody, callbackScenario } from './callback.js';

// Outcome events pushed to one healthy receiver while callbacks arrive at a steady rate: how long
// from a callback's 2xx to the receiver holding its event, and what pushing costs callback ingest
// (the callback scenario, A B A B, against a gateway with push on and one with push off).

export interface DeliverySettings {
  rate: number;
  durationS: number;
  warmupS: number;
  /** At most this long after the last callback for the last deliveries to arrive. */
  settleMs: number;
  ab: AbSettings;
  minCallbackRows: number;
  /**
   * 'one': one healthy receiver, configured (EVENT_WEBHOOK_URLS); push off is a gateway without it.
   * 'troubled' (issue 36): five endpoints made through /v1/endpoints (two healthy, one answering
   * after 2 s, one rate-limited to 20/s, one down); lag is measured to the healthy two, and push
   * off is every endpoint paused.
   */
  endpoints: 'one' | 'troubled';
}

export interface DeliveryReport {
  scenario: 'delivery';
  endpoints: 'one' | 'troubled';
  rate: number;
  callbacksOk: number;
  callbacksFailed: number;
  /** Callback answer latency at the steady rate, ms. */
  callbackP99Ms: number;
  delivered: number;
  missing: number;
  duplicates: number;
  /** Deliveries per second over the measured window. */
  deliveriesPerS: number;
  /** Receiver got it minus the callback's 2xx, ms. */
  lagMs: { p50: number; p99: number; max: number };
  /** Callback ingest, push on / push off, A B A B. */
  ingest: AbResult;
  goals: Goal[];
}

export const LAG_GOAL_P99_MS = 250;
export const INGEST_COST_GOAL = 0.9;

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;
}
const round1 = (v: number) => Math.round(v * 10) / 10;

/** A receiver in this process: 204 at once (or after answerAfterMs), arrival time per customer. */
export async function startReceiver(answerAfterMs = 0): Promise<{ url: string; arrivals: Map<string, number[]>; close(): Promise<void> }> {
  const arrivals = new Map<string, number[]>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = performance.now();
      try {
        const customer = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { data: { customerUuid: string } }).data.customerUuid;
        const list = arrivals.get(customer);
        if (list) list.push(at);
        else arrivals.set(customer, [at]);
      } catch {
        /* not an event: ignored */
      }
      res.statusCode = 204;
      if (answerAfterMs > 0) setTimeout(() => res.end(), answerAfterMs);
      else res.end();
    });
  });
  server.keepAliveTimeout = 30_000;
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/events`,
    arrivals,
    close: async () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

/** Callbacks at `rate` per second for durationS, each customer once; resolves with their 2xx times. */
async function steadyCallbacks(baseUrl: string, prefix: string, rate: number, durationS: number) {
  const pool = new Pool(baseUrl, { connections: 64, pipelining: 1 });
  const answered = new Map<string, number>();
  const latencies: number[] = [];
  let failed = 0;
  const total = Math.round(rate * durationS);
  const started = performance.now();
  const inFlight: Promise<void>[] = [];
  for (let n = 0; n < total; n++) {
    // Open loop: the n-th callback leaves at n / rate seconds, whatever the answers do.
    const due = started + (n * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 1) await sleep(wait);
    const customer = `${prefix}${n}`;
    const sent = performance.now();
    inFlight.push(
      pool
        .request({ method: 'POST', path: '/v1/callbacks/underwriting', headers: { 'content-type': 'application/json' }, body: callbackBody(customer, n) })
        .then(async (res) => {
          await res.body.dump();
          const at = performance.now();
          if (res.statusCode === 200) {
            answered.set(customer, at);
            latencies.push(at - sent);
          } else failed++;
        })
        .catch(() => {
          failed++;
        }),
    );
  }
  await Promise.all(inFlight);
  const elapsedS = (performance.now() - started) / 1000;
  await pool.close();
  return { answered, failed, latencies: latencies.sort((a, b) => a - b), elapsedS };
}

type Receiver = Awaited<ReturnType<typeof startReceiver>>;

/** Where events go, and how push is turned off for the ingest comparison. */
interface PushSetup {
  /** Receivers whose lag is measured (healthy ones). */
  measured: Receiver[];
  receivers: Receiver[];
  env: Record<string, string>;
  /** After the push-on gateway is ready: endpoints made through the API, if any. */
  create(baseUrl: string): Promise<void>;
  /** Push off for the baseline's round (troubled: every endpoint paused), and on again. */
  pause(baseUrl: string): Promise<void>;
  resume(baseUrl: string): Promise<void>;
  describe: string;
}

const BENCH_ADMIN_KEY = `bench-admin-${randomBytes(12).toString('hex')}`;

async function admin(baseUrl: string, method: string, path: string, body?: unknown): Promise<unknown> {
  const res = await fetch(`${baseUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${BENCH_ADMIN_KEY}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text === '' ? undefined : JSON.parse(text);
}

async function pushSetup(kind: DeliverySettings['endpoints']): Promise<PushSetup> {
  if (kind === 'one') {
    const receiver = await startReceiver();
    return {
      measured: [receiver],
      receivers: [receiver],
      env: { EVENT_WEBHOOK_URLS: receiver.url, EVENT_WEBHOOK_SECRET: `whsec_${randomBytes(32).toString('base64')}`, EVENT_WEBHOOK_TIMEOUT_MS: '5000' },
      create: async () => {},
      pause: async () => {},
      resume: async () => {},
      describe: 'one healthy receiver',
    };
  }
  const healthy = [await startReceiver(), await startReceiver()];
  const slow = await startReceiver(2_000);
  const limited = await startReceiver();
  const ids: string[] = [];
  // Diagnostic: BENCH_DELIVERY_TROUBLED=slow,down (say) keeps only those troubled endpoints.
  const troubled = new Set((process.env.BENCH_DELIVERY_TROUBLED ?? 'slow,limited,down').split(',').filter(Boolean));
  return {
    measured: healthy,
    receivers: [...healthy, slow, limited],
    env: { ADMIN_API_KEYS: BENCH_ADMIN_KEY, EVENT_WEBHOOK_TIMEOUT_MS: '5000' },
    create: async (baseUrl) => {
      const bodies = [
        ...healthy.map((r) => ({ url: r.url, description: 'healthy' })),
        ...(troubled.has('slow') ? [{ url: slow.url, description: 'slow: answers after 2 s' }] : []),
        ...(troubled.has('limited') ? [{ url: limited.url, description: 'rate-limited', rateLimitPerS: 20 }] : []),
        ...(troubled.has('down') ? [{ url: 'http://127.0.0.1:1/down', description: 'down' }] : []),
      ];
      for (const body of bodies) ids.push(((await admin(baseUrl, 'POST', '/v1/endpoints', body)) as { id: string }).id);
    },
    pause: async (baseUrl) => {
      for (const id of ids) await admin(baseUrl, 'PATCH', `/v1/endpoints/${id}`, { status: 'paused' });
    },
    resume: async (baseUrl) => {
      for (const id of ids) await admin(baseUrl, 'PATCH', `/v1/endpoints/${id}`, { status: 'active' });
    },
    describe: `${2 + troubled.size} endpoints (two healthy${troubled.has('slow') ? ', one slow at 2 s per answer' : ''}${troubled.has('limited') ? ', one rate-limited at 20/s' : ''}${troubled.has('down') ? ', one down' : ''})`,
  };
}

export async function deliveryScenario(
  database: BenchDatabase,
  startGateway: (extraEnv: Record<string, string>, label: string) => Promise<Child>,
  settings: DeliverySettings,
  say: (line: string) => void,
): Promise<DeliveryReport> {
  const setup = await pushSetup(settings.endpoints);
  say(`\ndelivery: callbacks at ${settings.rate}/s for ${settings.durationS} s, events pushed to ${setup.describe}`);
  const drainMeasured = async () => (await Promise.all(setup.measured.map((r) => drainDeliveries(database, r.url)))).join('; ');
  const on = await startGateway(setup.env, 'delivery-on');
  let off: Child | undefined;
  try {
    await setup.create(on.baseUrl);
    const warm = 'dlw-';
    await seedSubmitted(database.pool, warm, Math.round(settings.rate * settings.warmupS));
    await steadyCallbacks(on.baseUrl, warm, settings.rate, settings.warmupS);
    // The measured run starts with nothing left over from the warm-up (a cold process may fall behind).
    say(`  warm-up settled: ${await drainMeasured()}`);

    const prefix = 'dl-';
    await seedSubmitted(database.pool, prefix, Math.round(settings.rate * settings.durationS));
    const run = await steadyCallbacks(on.baseUrl, prefix, settings.rate, settings.durationS);
    const deadline = performance.now() + settings.settleMs;
    const arrivedEverywhere = (c: string) => setup.measured.every((r) => r.arrivals.has(c));
    const ours = () => [...run.answered.keys()].filter(arrivedEverywhere).length;
    while (ours() < run.answered.size && performance.now() < deadline) await sleep(50);

    const lags: number[] = [];
    let duplicates = 0;
    let delivered = 0;
    let first = Number.POSITIVE_INFINITY;
    let last = 0;
    for (const receiver of setup.measured) {
      for (const [customer, answeredAt] of run.answered) {
        const got = receiver.arrivals.get(customer);
        if (!got) continue;
        delivered++;
        duplicates += got.length - 1;
        lags.push(got[0]! - answeredAt);
        first = Math.min(first, got[0]!);
        last = Math.max(last, got[0]!);
      }
    }
    lags.sort((a, b) => a - b);
    const expected = run.answered.size * setup.measured.length;
    const missingCustomers = [...run.answered.keys()].filter((c) => !arrivedEverywhere(c));
    if (missingCustomers.length > 0) say(`  missing: ${await describeMissing(database, setup.measured[0]!.url, missingCustomers.slice(0, 5))}`);
    const lagMs = { p50: round1(percentile(lags, 50)), p99: round1(percentile(lags, 99)), max: round1(lags.at(-1) ?? Number.NaN) };
    const deliveriesPerS = last > first ? round1(delivered / ((last - first) / 1000)) : 0;
    const others = setup.receivers.filter((r) => !setup.measured.includes(r)).map((r) => r.arrivals.size);
    say(
      `  ${run.answered.size} callbacks 2xx (${run.failed} failed) in ${round1(run.elapsedS)} s, callback p99 ${round1(percentile(run.latencies, 99))} ms; ` +
        `${delivered} of ${expected} delivered to the measured receivers (${duplicates} twice), ${deliveriesPerS}/s; lag p50 ${lagMs.p50} ms p99 ${lagMs.p99} ms max ${lagMs.max} ms` +
        (others.length > 0 ? `; the slow and the rate-limited receivers got ${others.join(' and ')} events` : ''),
    );

    if (process.env.BENCH_DELIVERY_LAG_ONLY) throw new Error('BENCH_DELIVERY_LAG_ONLY: the lag only (a diagnostic)');
    say(`  callback ingest, push on (as "gateway") against push off (as "baseline"${settings.endpoints === 'troubled' ? ': every endpoint paused' : ''}):`);
    off = await startGateway(settings.endpoints === 'troubled' ? setup.env : {}, 'delivery-off');
    const offPid = off.pid;
    const offUrl = off.baseUrl;
    const targets = {
      // Deliveries still pending after a push-on run go out before the push-off run starts: ingest
      // is compared with the push's work done, none of it carried over into the other round.
      // Each gateway is stopped (SIGSTOP) while the other runs its round, so that neither pays for
      // the other (an idle instance still hears every commit's notification), and resumed right
      // after that round, so that both come back the same time before their own (a process
      // resumed just before its round starts it with every timer of the pause firing). The
      // push-on gateway pushes every event of the shared database, the push-off one's too: push
      // off means no one pushes; after a push-off round it resumes and pushes them, untimed.
      // With troubled endpoints, push off is every endpoint paused for the push-off round.
      gateway: {
        ...on,
        dbCpu: () => backendCpuSnapshot(database, GATEWAY_APPLICATIONS),
        before: async () => {
          process.kill(offPid, 'SIGSTOP');
        },
        settle: async () => {
          const drained = await drainMeasured();
          process.kill(offPid, 'SIGCONT');
          return drained;
        },
      },
      baseline: {
        ...off,
        dbCpu: async () => null,
        before: async () => {
          await setup.pause(offUrl);
          process.kill(on.pid, 'SIGSTOP');
        },
        settle: async () => {
          process.kill(on.pid, 'SIGCONT');
          await setup.resume(offUrl);
          return `push-on gateway resumed; ${await drainMeasured()}`;
        },
      },
    };
    const walBytes = async () => {
      const { rows } = await database.pool.query<{ b: string }>(`select pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint as b`);
      return Number(rows[0]?.b ?? 0);
    };
    const ingest = await compareAb(callbackScenario(database.pool, { minRows: settings.minCallbackRows }), targets, walBytes, { ...settings.ab, wrkRounds: 0, flushWrites: () => flushWrites(database.pool) }, say);
    const goals: Goal[] = [
      { goal: `delivery lag p99 <= ${LAG_GOAL_P99_MS} ms at ${settings.rate} callbacks/s (${setup.describe})`, measured: `${lagMs.p99} ms`, met: lagMs.p99 <= LAG_GOAL_P99_MS && delivered === expected },
      { goal: `push on costs callback ingest <= ${Math.round((1 - INGEST_COST_GOAL) * 100)}%`, measured: `${ingest.ratio}x (rounds ${ingest.roundRatios.join(', ')})`, met: ingest.ratio >= INGEST_COST_GOAL },
    ];
    return {
      scenario: 'delivery',
      endpoints: settings.endpoints,
      rate: settings.rate,
      callbacksOk: run.answered.size,
      callbacksFailed: run.failed,
      callbackP99Ms: round1(percentile(run.latencies, 99)),
      delivered,
      missing: expected - delivered,
      duplicates,
      deliveriesPerS,
      lagMs,
      ingest,
      goals,
    };
  } finally {
    // Never left stopped: a stopped process would not hear the stop.
    process.kill(on.pid, 'SIGCONT');
    if (off) process.kill(off.pid, 'SIGCONT');
    await Promise.all([on.stop(), off?.stop()]);
    for (const receiver of setup.receivers) await receiver.close();
  }
}

/** Waits until no delivery is pending; says how many were and how long they took to go out. */
/** Where the events of customers whose delivery never arrived stand: their rows and the URL's position. */
async function describeMissing(database: BenchDatabase, receiverUrl: string, customers: string[]): Promise<string> {
  const { rows } = await database.pool.query(
    `select e.customer_uuid, e.id, e.tx_id::text as tx, e.created_at,
            (select json_agg(json_build_object('status', d.status, 'attempts', d.attempts, 'lease', d.lease_until, 'next', d.next_attempt_at, 'error', d.last_error))
               from event_deliveries d where d.event_id = e.id) as deliveries,
            (select json_build_object('tx', c.tx_id::text, 'id', c.event_id, 'at', c.updated_at) from event_dispatch c where c.url = $2) as position
       from events e where e.customer_uuid = any($1::text[])`,
    [customers, redactUrl(receiverUrl)],
  );
  return JSON.stringify(rows);
}

/** Waits for the receiver's deliveries to go out: those written and pending, and those not written yet. */
export async function drainDeliveries(database: BenchDatabase, receiverUrl: string, limitMs = 120_000): Promise<string> {
  // The receiver's position, by its URL as stored (its key is keyed under the gateway's CPF_HASH_KEY).
  const shown = redactUrl(receiverUrl);
  const pending = async () => {
    const { rows } = await database.pool.query<{ n: string }>(
      `select (select count(*) from event_deliveries where status = 'pending' and url = $1)
            + (select count(*) from event_dispatch c join events e on (e.tx_id, e.id) > (c.tx_id, c.event_id) where c.url = $1) as n`,
      [shown],
    );
    return Number(rows[0]?.n ?? 0);
  };
  const started = performance.now();
  const backlog = await pending();
  let left = backlog;
  while (left > 0 && performance.now() - started < limitMs) {
    await sleep(50);
    left = await pending();
  }
  const took = Math.round(performance.now() - started);
  return left > 0 ? `${left} of ${backlog} deliveries still pending after ${took} ms` : `${backlog} pending deliveries went out in ${took} ms`;
}

export function renderDelivery(r: DeliveryReport): string {
  const g = r.ingest.gateway;
  const b = r.ingest.baseline;
  return (
    `delivery (${r.endpoints === 'troubled' ? 'five endpoints, three troubled' : 'one endpoint'}): ${r.callbacksOk} callbacks at ${r.rate}/s (p99 ${r.callbackP99Ms} ms, ${r.callbacksFailed} failed); ${r.delivered} events delivered ` +
    `(${r.missing} missing, ${r.duplicates} twice) at ${r.deliveriesPerS}/s; lag callback 2xx -> receiver p50 ${r.lagMs.p50} ms p99 ${r.lagMs.p99} ms max ${r.lagMs.max} ms\n` +
    `callback ingest push on ${g.rps} req/s (p99 ${g.p99} ms) vs push off ${b.rps} req/s (p99 ${b.p99} ms): ${r.ingest.ratio}x (rounds ${r.ingest.roundRatios.join(', ')})\n` +
    r.goals.map((goal) => `  ${goal.goal}: ${goal.measured} ${verdict(goal)}`).join('\n')
  );
}
