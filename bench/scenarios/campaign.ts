import { randomInt } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { SANDBOX_DEFAULT_PARTNER_TOKEN } from '../../src/sandbox/config.js';
import { backendCpuBetween, backendCpuSnapshot, type BenchDatabase, createBenchDatabase, GATEWAY_APPLICATIONS, seedSubmitted } from '../lib/database.js';
import { describeProbe, type ProbeFigures, probeReader } from '../lib/probe.js';
import { type Child, cpuTimeMs, freePort, RssSampler, schedPerSecond, schedTimesOf, startChild } from '../lib/processes.js';
import { cpfOf } from '../lib/states.js';

// Issue 37's figures (bench/README.md, "campaign"): a campaign of N lines against the sandbox at a
// provider limit, across 2 gateway instances on one PostgreSQL database, with its faults. Counted
// at the sandbox (GET /_sandbox/stats): calls per second, and which customers it received (twice?).
//
// 1. The database, the sandbox (SANDBOX_MAX_RPS, callbacks to instance 1 after 200 ms) and two
//    gateways (PROVIDER_MAX_RPS) start; other customers' requests are seeded, awaiting callbacks.
// 2. Instance 1 is sent the file (upload seconds, its peak RSS meanwhile).
// 3. Other customers' callbacks and queries, timed, in windows A B A B: A with the provider held
//    (provider_pacing.hold_until: nothing forwarded), B with the campaign forwarding.
// 4. Faults: kill -9 of instance 2 (started again after 2 s), then a provider outage (the sandbox
//    answers every call 503, Retry-After 1) for outageS.
// 5. Wait until no request of the campaign is queued, being sent or awaiting its callback; then count.

export interface CampaignOptions {
  adminUrl: string;
  lines: number;
  maxRps: number;
  /** The provider outage, in seconds (issue 37: 30). */
  outageS: number;
  /** Each A or B window of the other customers' load, in seconds. */
  windowS: number;
  /** How long the campaign may take to settle once the faults are over. */
  settleTimeoutS?: number;
  /** The gateway and sandbox entries, and the Node flags to run them with (the bench: dist/; the suite: .tap-build/, what npm test compiles). */
  gatewayEntry?: string;
  sandboxEntry?: string;
  nodeArgs?: readonly string[];
  /** bench/probe.js: instance 2 (the one the other customers talk to) runs with it, and each window says what it saw inside. */
  probeEntry?: string;
  say?: (line: string) => void;
}

/** Where the time of a window went, to tell the campaign's cost to the other customers apart. */
export interface WindowLoad {
  /** CPU each process used, ms per second of the window (postgres: the gateways' backends, the LISTEN ones included). */
  cpuMsPerS: { gateway1: number | null; gateway2: number | null; sandbox: number | null; postgres: number | null; harness: number };
  /** Instance 2's threads: ms per second they were runnable but waited for a CPU (the 2 shared cores). */
  gateway2RunQueueMsPerS: number | null;
  /** Calls the sandbox received per second during the window (the campaign's forwards). */
  forwardedPerS: number;
  /** Transactions committed in the database per second (pg_stat_database; its counts lag by up to a second). */
  commitsPerS: number;
  /** The 1-minute load average at the window's end. */
  loadAverage: number;
  /**
   * The gateways' backends in pg_stat_activity, sampled every 100 ms: how many were active on
   * average, by what they waited for ('CPU' when nothing: running, or runnable).
   */
  activeBackends: Record<string, number>;
  /** Instance 2 seen from inside (with probeEntry). */
  inside?: ProbeFigures | null;
}

export interface LatencyWindow {
  phase: 'A' | 'B';
  callbacks: number;
  callbackP99Ms: number | null;
  queries: number;
  queryP99Ms: number | null;
  failures: number;
  load: WindowLoad;
}

export interface CampaignReport {
  lines: number;
  accepted: number;
  uploadS: number;
  uploadPeakRssMb: number | null;
  maxRps: number;
  /** Calls the sandbox counted per second, over the seconds the campaign was forwarded steadily (first and last second, held windows and the outage left out). */
  medianRateShare: number | null;
  secondsOverLimit: number;
  busiestSecond: number;
  windows: LatencyWindow[];
  /** p99 over the A windows and over the B windows (ms), and B over A. */
  callbackP99: { a: number | null; b: number | null; ratio: number | null };
  queryP99: { a: number | null; b: number | null; ratio: number | null };
  faults: { killedAt: string; outage: { from: string; to: string } };
  /** Customers the sandbox ran more than once. */
  submittedTwice: string[];
  /** Accepted lines not in a final state at the end, or completed without the sandbox having run them. */
  lost: string[];
  /** How the accepted lines ended. */
  outcomes: Record<string, number>;
  sandboxCalls: Record<string, number>;
}

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url));

function alphanumeric(length: number): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  return Array.from({ length }, () => alphabet[randomInt(alphabet.length)]).join('');
}

const p99 = (values: number[]): number | null => {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return Math.round(sorted[Math.min(sorted.length - 1, Math.ceil(0.99 * sorted.length) - 1)]! * 10) / 10;
};

interface SandboxStats {
  calls: Record<string, number>;
  perSecond: Record<string, number>;
  received: Record<string, number>;
}

export async function runCampaignScenario(options: CampaignOptions): Promise<CampaignReport> {
  const say = options.say ?? (() => undefined);
  const gatewayEntry = options.gatewayEntry ?? here('../../src/server.js');
  const sandboxEntry = options.sandboxEntry ?? here('../../src/sandbox/server.js');
  const nodeArgs = options.nodeArgs ?? [];
  const prefix = `cmp${Date.now().toString(36)}-`;
  const database: BenchDatabase = await createBenchDatabase(options.adminUrl);
  const children = new Set<Child>();
  try {
    const [sandboxPort, port1, port2] = [await freePort(), await freePort(), await freePort()];
    const gatewayUrl = `http://127.0.0.1:${port1}`;
    const sandbox = await startChild({
      name: 'sandbox',
      script: sandboxEntry,
      nodeArgs,
      readyPath: '/healthz',
      port: sandboxPort,
      portVariable: 'SANDBOX_PORT',
      env: {
        NODE_ENV: 'production',
        LOG_LEVEL: 'warn',
        SANDBOX_CALLBACK_URL: `${gatewayUrl}/v1/callbacks/underwriting`,
        SANDBOX_DELAY_MS: '200',
        SANDBOX_MAX_RPS: String(options.maxRps),
      },
    });
    children.add(sandbox);
    const gatewayEnv = {
      NODE_ENV: 'production',
      LOG_LEVEL: 'warn',
      DATABASE_URL: database.url,
      PROVIDER_BASE_URL: sandbox.baseUrl,
      PARTNER_TOKEN: SANDBOX_DEFAULT_PARTNER_TOKEN,
      CPF_HASH_KEY: alphanumeric(48),
      CALLBACK_ALLOWED_IPS: '127.0.0.1/32',
      PROVIDER_MAX_RPS: String(options.maxRps),
    };
    const probeFile = options.probeEntry ? join(tmpdir(), `${prefix}probe.jsonl`) : undefined;
    const startGateway = async (n: 1 | 2, port: number) => {
      const probed = n === 2 && probeFile !== undefined;
      const child = await startChild({
        name: `gateway ${n}`,
        script: gatewayEntry,
        nodeArgs: probed ? [...nodeArgs, '--import', options.probeEntry!] : nodeArgs,
        readyPath: '/readyz',
        // In the suite, beside other test files on a loaded host: CI saw a restart (then compiled by tsx) pass 30 s.
        readyTimeoutMs: 120_000,
        port,
        env: probed ? { ...gatewayEnv, PROBE_FILE: probeFile } : gatewayEnv,
      });
      children.add(child);
      return child;
    };
    const gateway1 = await startGateway(1, port1);
    let gateway2 = await startGateway(2, port2);
    const sandboxStats = async (): Promise<SandboxStats> => (await fetch(`${sandbox.baseUrl}/_sandbox/stats`)).json() as Promise<SandboxStats>;
    const faults = (change: Record<string, unknown>) =>
      fetch(`${sandbox.baseUrl}/_sandbox/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(change) }).then((r) => r.arrayBuffer());
    const hold = (on: boolean) => database.pool.query(`update provider_pacing set hold_until = ${on ? `now() + interval '1 day'` : `'-infinity'`}`);
    const openRequests = async () =>
      Number(
        (
          await database.pool.query<{ n: string }>(
            `select count(*) as n from underwriting_requests where campaign_id is not null and status in ('queued', 'submitting', 'submitted')`,
          )
        ).rows[0]!.n,
      );

    // Other customers: requests awaiting their callbacks, enough for every window.
    const others = 4 * 200 * Math.max(1, options.windowS) + 1000;
    await seedSubmitted(database.pool, `${prefix}other-`, others);
    let nextOther = 0;

    // 2. The upload, held from forwarding until it is read whole (so that the first B window is the campaign's own).
    await hold(true);
    const file = Buffer.from(
      Array.from({ length: options.lines }, (_, i) =>
        JSON.stringify({
          customerUuid: `${prefix}${i}`,
          cpf: cpfOf(i + 1),
          costSavingEnabled: i % 5 === 0,
          srd: { grossIncome: 3000 + (i % 7000), address: { street: 'Rua das Flores', number: String(i % 999), city: 'São Paulo', state: 'SP' } },
        }),
      ).join('\n') + '\n',
    );
    const rss = new RssSampler(gateway1.pid);
    const uploadStarted = performance.now();
    const res = await fetch(`${gateway1.baseUrl}/v1/campaigns`, { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body: file });
    const answer = (await res.json()) as { id: string; accepted: number; rejectedTotal: number };
    const uploadS = (performance.now() - uploadStarted) / 1000;
    const uploadPeakRssMb = rss.finish();
    // With what instance 1 logged (warnings and errors): an answer such as 503 says only what, not why.
    if (res.status !== 202) throw new Error(`the upload was answered ${res.status}: ${JSON.stringify(answer)}\ninstance 1 logged:\n${gateway1.output()}`);
    say(`campaign: ${answer.accepted} of ${options.lines} lines accepted in ${uploadS.toFixed(2)} s (instance 1 peak RSS ${uploadPeakRssMb ?? 'n/a'} MB)`);

    // 3. Other customers, A B A B.
    const heldSeconds = new Set<number>();
    const second = () => Math.floor(Date.now() / 1000);
    const windows: LatencyWindow[] = [];
    const callbackLatencies: Record<'A' | 'B', number[]> = { A: [], B: [] };
    const queryLatencies: Record<'A' | 'B', number[]> = { A: [], B: [] };
    for (const phase of ['A', 'B', 'A', 'B'] as const) {
      await hold(phase === 'A');
      const callbacks: number[] = [];
      const queries: number[] = [];
      let failures = 0;
      const until = Date.now() + options.windowS * 1000;
      const worker = async () => {
        while (Date.now() < until && nextOther < others) {
          const customerUuid = `${prefix}other-${nextOther++}`;
          const now = new Date();
          const body = JSON.stringify({
            customerUuid,
            started: new Date(now.getTime() - 2000).toISOString(),
            finished: now.toISOString(),
            serviceType: 'CREDIT_SCORE',
            response: { costSavingEnabled: false, score: 700, riskBand: 2, limit: 5000 },
          });
          let t0 = performance.now();
          const cb = await fetch(`${gateway2.baseUrl}/v1/callbacks/underwriting`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
          await cb.arrayBuffer();
          callbacks.push(performance.now() - t0);
          t0 = performance.now();
          const q = await fetch(`${gateway2.baseUrl}/v1/underwritings/${customerUuid}`);
          await q.arrayBuffer();
          queries.push(performance.now() - t0);
          if (!cb.ok || !q.ok) failures++;
          await sleep(20);
        }
      };
      const from = second();
      const pids = { gateway1: gateway1.pid, gateway2: gateway2.pid, sandbox: sandbox.pid };
      const cpuBefore = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, cpuTimeMs(pid)]));
      const harnessBefore = process.cpuUsage();
      const backendsBefore = await backendCpuSnapshot(database, GATEWAY_APPLICATIONS);
      const schedBefore = schedTimesOf([gateway2.pid]);
      const calls = async () => (await sandboxStats()).calls.total ?? 0;
      const commits = async () =>
        Number((await database.pool.query<{ n: string }>('select xact_commit as n from pg_stat_database where datname = $1', [database.name])).rows[0]!.n);
      const [callsBefore, commitsBefore] = [await calls(), await commits()];
      const startedAt = performance.now();
      const inside = probeFile ? probeReader(gateway2.pid, probeFile) : undefined;
      await inside?.();
      const activity = sampleActivity(database, until);
      await Promise.all([worker(), worker()]);
      const seconds = (performance.now() - startedAt) / 1000;
      const perS = (before: number | null | undefined, after: number | null) => (before == null || after === null ? null : Math.round((after - before) / seconds));
      const harness = process.cpuUsage(harnessBefore);
      const load: WindowLoad = {
        cpuMsPerS: {
          gateway1: perS(cpuBefore.gateway1, cpuTimeMs(pids.gateway1)),
          gateway2: perS(cpuBefore.gateway2, cpuTimeMs(pids.gateway2)),
          sandbox: perS(cpuBefore.sandbox, cpuTimeMs(pids.sandbox)),
          postgres: perS(0, backendCpuBetween(backendsBefore, await backendCpuSnapshot(database, GATEWAY_APPLICATIONS))),
          harness: Math.round((harness.user + harness.system) / 1000 / seconds),
        },
        forwardedPerS: Math.round(((await calls()) - callsBefore) / seconds),
        commitsPerS: Math.round(((await commits()) - commitsBefore) / seconds),
        gateway2RunQueueMsPerS: schedPerSecond(schedBefore, schedTimesOf([gateway2.pid]), seconds)?.waitMs ?? null,
        loadAverage: Math.round(loadavg()[0]! * 100) / 100,
        activeBackends: await activity,
        ...(inside ? { inside: await inside() } : {}),
      };
      if (phase === 'A') for (let s = from; s <= second(); s++) heldSeconds.add(s);
      callbackLatencies[phase].push(...callbacks);
      queryLatencies[phase].push(...queries);
      windows.push({ phase, callbacks: callbacks.length, callbackP99Ms: p99(callbacks), queries: queries.length, queryP99Ms: p99(queries), failures, load });
      say(`  window ${phase}: ${callbacks.length} callbacks p99 ${p99(callbacks)} ms, ${queries.length} queries p99 ${p99(queries)} ms, ${failures} failed`);
      say(`    ${describeLoad(load)}`);
    }
    await hold(false);

    // 4. Faults, while requests are still queued (at a small --lines they may all have gone: said in the report).
    const killedAt = new Date().toISOString();
    await gateway2.kill();
    children.delete(gateway2);
    say(`  kill -9 of instance 2 at ${killedAt} (${await openRequests()} of the campaign's requests open)`);
    await sleep(2000);
    gateway2 = await startGateway(2, port2);
    const outageFrom = new Date();
    await faults({ fail503Rate: 1 });
    await sleep(options.outageS * 1000);
    await faults({ fail503Rate: 0 });
    const outageTo = new Date();
    say(`  provider outage (every call 503) ${outageFrom.toISOString()} - ${outageTo.toISOString()}`);
    const outageSeconds = new Set<number>();
    for (let s = Math.floor(outageFrom.getTime() / 1000); s <= Math.floor(outageTo.getTime() / 1000) + 1; s++) outageSeconds.add(s);

    // 5. Settle, then count.
    const deadline = Date.now() + (options.settleTimeoutS ?? Math.max(120, (3 * options.lines) / options.maxRps)) * 1000;
    while ((await openRequests()) > 0 && Date.now() < deadline) await sleep(500);
    const stats = await sandboxStats();
    const { rows } = await database.pool.query<{ customer_uuid: string; status: string }>(
      `select customer_uuid, status from underwriting_requests where campaign_id is not null`,
    );
    const outcomes: Record<string, number> = {};
    const lost: string[] = [];
    for (const row of rows) {
      outcomes[row.status] = (outcomes[row.status] ?? 0) + 1;
      const received = stats.received[row.customer_uuid] ?? 0;
      const final = row.status === 'completed' || row.status === 'submit_failed' || row.status === 'expired' || row.status === 'cancelled';
      if (!final || (row.status === 'completed' && received === 0)) lost.push(row.customer_uuid);
    }
    if (rows.length !== answer.accepted) lost.push(`(${answer.accepted - rows.length} accepted lines have no request)`);
    const submittedTwice = Object.entries(stats.received)
      .filter(([customer, n]) => customer.startsWith(prefix) && n > 1)
      .map(([customer]) => customer);

    // The steady seconds: calls counted, the held windows, the outage, the first and last second left out.
    const perSecond = Object.entries(stats.perSecond).map(([s, n]) => [Number(s), n] as const).sort((a, b) => a[0] - b[0]);
    const steady = perSecond.slice(1, -1).filter(([s]) => !heldSeconds.has(s) && !outageSeconds.has(s)).map(([, n]) => n).sort((a, b) => a - b);
    const medianRateShare = steady.length === 0 ? null : Math.round((steady[Math.floor(steady.length / 2)]! / options.maxRps) * 1000) / 1000;
    const ratio = (a: number | null, b: number | null) => (a === null || b === null || a === 0 ? null : Math.round((b / a) * 100) / 100);
    const callbackP99 = { a: p99(callbackLatencies.A), b: p99(callbackLatencies.B), ratio: 0 as number | null };
    callbackP99.ratio = ratio(callbackP99.a, callbackP99.b);
    const queryP99 = { a: p99(queryLatencies.A), b: p99(queryLatencies.B), ratio: 0 as number | null };
    queryP99.ratio = ratio(queryP99.a, queryP99.b);
    return {
      lines: options.lines,
      accepted: answer.accepted,
      uploadS: Math.round(uploadS * 100) / 100,
      uploadPeakRssMb,
      maxRps: options.maxRps,
      medianRateShare,
      secondsOverLimit: perSecond.filter(([, n]) => n > options.maxRps).length,
      busiestSecond: Math.max(0, ...perSecond.map(([, n]) => n)),
      windows,
      callbackP99,
      queryP99,
      faults: { killedAt, outage: { from: outageFrom.toISOString(), to: outageTo.toISOString() } },
      submittedTwice,
      lost,
      outcomes,
      sandboxCalls: stats.calls,
    };
  } finally {
    await Promise.all([...children].map((c) => c.stop()));
    await database.drop();
    if (options.probeEntry) await rm(join(tmpdir(), `${prefix}probe.jsonl`), { force: true });
  }
}

/** The gateways' active backends by wait event, sampled every 100 ms until `until` (Date.now()), averaged per sample. */
async function sampleActivity(database: BenchDatabase, until: number): Promise<Record<string, number>> {
  const seen: Record<string, number> = {};
  let samples = 0;
  while (Date.now() < until) {
    const { rows } = await database.pool.query<{ wait: string; n: number }>(
      `select coalesce(wait_event_type || ':' || wait_event, 'CPU') as wait, count(*)::int as n
         from pg_stat_activity
        where datname = $1 and application_name = any($2::text[]) and state = 'active'
        group by 1`,
      [database.name, GATEWAY_APPLICATIONS],
    );
    samples++;
    for (const { wait, n } of rows) seen[wait] = (seen[wait] ?? 0) + n;
    await sleep(100);
  }
  return Object.fromEntries(Object.entries(seen).sort((a, b) => b[1] - a[1]).map(([wait, n]) => [wait, Math.round((n / Math.max(1, samples)) * 100) / 100]));
}

function describeLoad(l: WindowLoad): string {
  const c = l.cpuMsPerS;
  const waits = Object.entries(l.activeBackends).map(([w, n]) => `${w} ${n}`).join(', ') || 'none';
  return (
    `forwarded ${l.forwardedPerS}/s, ${l.commitsPerS} commits/s; CPU ms/s: gateway 1 ${c.gateway1}, gateway 2 ${c.gateway2} (run queue ${l.gateway2RunQueueMsPerS}), sandbox ${c.sandbox}, postgres ${c.postgres}, harness ${c.harness}; load ${l.loadAverage}; ` +
    `active backends: ${waits}` +
    (l.inside ? `\n    instance 2 inside: ${describeProbe(l.inside)}` : '')
  );
}

/** The report as lines, with issue 37's goals judged (the full-size figures mean something only on a quiet machine). */
export function renderCampaign(r: CampaignReport): string[] {
  const judged = (ok: boolean) => (ok ? 'met' : 'missed');
  return [
    `campaign: ${r.lines} lines (${r.accepted} accepted), PROVIDER_MAX_RPS = SANDBOX_MAX_RPS = ${r.maxRps}, 2 gateway instances`,
    `  forwarded at the sandbox: median ${r.medianRateShare === null ? 'n/a' : `${(r.medianRateShare * 100).toFixed(1)}%`} of the limit over the steady seconds (goal >= 95%: ${judged((r.medianRateShare ?? 0) >= 0.95)}); ` +
      `${r.secondsOverLimit} seconds over the limit (busiest ${r.busiestSecond}; goal 0: ${judged(r.secondsOverLimit === 0)})`,
    `  upload: ${r.uploadS} s (goal <= 10 s for 100,000 lines: ${r.lines >= 100_000 ? judged(r.uploadS <= 10) : 'not judged below 100,000 lines'}); peak RSS of the uploading instance ${r.uploadPeakRssMb ?? 'n/a'} MB (goal <= 200: ${judged((r.uploadPeakRssMb ?? 0) <= 200)})`,
    `  other customers, A (campaign held) vs B (forwarding): callback p99 ${r.callbackP99.a} / ${r.callbackP99.b} ms (${r.callbackP99.ratio}x), query p99 ${r.queryP99.a} / ${r.queryP99.b} ms (${r.queryP99.ratio}x) (goal within 1.10x)`,
    `  faults: kill -9 of instance 2 at ${r.faults.killedAt}; provider outage ${r.faults.outage.from} - ${r.faults.outage.to}`,
    `  counted at the sandbox: ${r.submittedTwice.length} customers submitted twice, ${r.lost.length} lines lost (goal 0 and 0: ${judged(r.submittedTwice.length === 0 && r.lost.length === 0)}); outcomes ${JSON.stringify(r.outcomes)}; calls ${JSON.stringify(r.sandboxCalls)}`,
  ];
}
