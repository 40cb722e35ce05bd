import { randomBytes, randomInt } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cpus, loadavg, totalmem } from 'node:os';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { commandLine } from '../src/config/cli.js';
import { type AbScenario, type CheckpointTimes, compareAb } from './lib/compare.js';
import { tracingGoals } from './lib/tracing-goals.js';
import { type BenchDatabase, backendCpuSnapshot, createBenchDatabase, flushWrites, GATEWAY_APPLICATIONS, statementTotals } from './lib/database.js';
import { type OwnPostgres, startOwnPostgres } from './lib/own-postgres.js';
import { wrkAvailable } from './lib/wrk.js';
import { probeReader } from './lib/probe.js';
import { type Child, GATEWAY_NODE_ARGS, RssSampler, startChild, stopAll } from './lib/processes.js';
import { type StatementTiming, statementGoals, statementLines, timeStatements, timeStatistics } from './lib/statement-timings.js';
import { type AbReport, type ColdStart, type Goal, type LongPollReport, type Noise, abGoals, buffersFlatGoal, longPollGoals, renderReport, stateGoals } from './lib/report.js';
import { API_LOAD_LIMIT, afterLoading, BULK_SPREAD_DAYS, beforeLoading, type BenchState, closePastHours, configuredEndpoints, databaseBuffers, loadInBulk, loadThroughApi, STATE_NAMES, type StateRun, stateRuns, storedRequests } from './lib/states.js';
import { callbackScenario, callbackStateScenario } from './scenarios/callback.js';
import { type DeliveryReport, deliveryScenario, drainDeliveries, renderDelivery, startReceiver } from './scenarios/delivery.js';
import { getOneScenario, seedGetOne } from './scenarios/get-one.js';
import { runLongPolls } from './scenarios/long-poll.js';
import { submitScenario } from './scenarios/submit.js';
import { type CampaignReport, renderCampaign, runCampaignScenario } from './scenarios/campaign.js';
import { BENCH_OPTION_DETAILS, BENCH_OPTIONS } from './lib/options.js';

// `npm run bench [-- --quick] [--only=callback,callback-push,submit,get-one,long-poll,delivery,cold-start,campaign] [--lines=100000] [--outage-s=30] [--campaign-rps=200] [--states=a,b,c,d] [--sizes=10k,100k,1m] [--state-push=off|on|both] [--spread-days=28] [--profile] [--probe] [--own-postgres] [--long-poll-callbacks=32] [--delivery-rate=500] [--delivery-endpoints=one|troubled]`:
// the gateway against naive baselines, side by side in one run. Exit 0 whether goals are met or
// not; non-zero only when the harness itself fails.

const cli = commandLine({
  command: 'npm run bench [-- options] (node dist/bench/run.js)',
  summary: 'Runs the benchmarks: the gateway against naive baselines, side by side (bench/README.md).',
  details: BENCH_OPTION_DETAILS,
  accepts: (arg) => BENCH_OPTIONS.test(arg),
});
if (cli === undefined) process.exit();
const args = cli;
const quick = args.includes('--quick');
const profile = args.includes('--profile');
/** --probe-profile: --probe, and a CPU profile of each run of each side (bench/results/profiles/<label>-<n>.cpuprofile). */
const probeProfile = args.includes('--probe-profile');
const probe = probeProfile || args.includes('--probe');
const ownPostgres = args.includes('--own-postgres');
const rateArg = args.find((a) => a.startsWith('--rate='))?.slice('--rate='.length);
const onlyArg = args.find((a) => a.startsWith('--only='))?.slice('--only='.length);
const only = onlyArg ? new Set(onlyArg.split(',')) : undefined;
const wanted = (name: string) => only === undefined || only.has(name);
/** The callback A/B's bench states and sizes (bench/lib/states.ts): each state at each size. */
const states = stateRuns(args.find((a) => a.startsWith('--states='))?.slice('--states='.length), args.find((a) => a.startsWith('--sizes='))?.slice('--sizes='.length));
/**
 * --tracing: each A/B runs the gateway with tracing on (exporting protobuf to the stub, an OTLP
 * sink) against the same build with tracing off, instead of against the baseline. --tracing=off:
 * this build with tracing off against BENCH_TRACING_BASE_ENTRY (a build from before tracing).
 * --tracing=aa: both sides this build with tracing off (A/A): how far apart two equal sides come.
 */
const tracingArg = args.find((a) => a === '--tracing' || a.startsWith('--tracing='));
const tracingMode = tracingArg === undefined ? undefined : tracingArg === '--tracing=off' ? 'off' : tracingArg === '--tracing=aa' ? 'aa' : 'on';
const numberArg = (name: string, fallback: number) => {
  const raw = args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  return raw !== undefined && /^\d+$/.test(raw) ? Number(raw) : fallback;
};

/**
 * --state-push=off|on|both: the bench states' callback A/B with outcome events pushed to a receiver
 * (`callback-push [a 10k]`, each on a database of its own), without (the default), or both one after
 * the other (issue 34: every goal judged with push on and off).
 */
/**
 * --spread-days=N: a bench state's requests beyond the API's share lie evenly over the last N days
 * (default 28, as a deployment's accumulate; 0: all now), their past hours closed as the instances'
 * closing passes would have (the statistics read takes a closed hour from one row).
 */
const spreadDays = numberArg('spread-days', BULK_SPREAD_DAYS);
const statePushRaw = args.find((a) => a.startsWith('--state-push='))?.slice('--state-push='.length) ?? 'off';
if (statePushRaw !== 'off' && statePushRaw !== 'on' && statePushRaw !== 'both') throw new Error(`--state-push=${statePushRaw}: off, on or both`);
const statePushModes: readonly boolean[] = statePushRaw === 'both' ? [false, true] : [statePushRaw === 'on'];

const deliveryEndpointsRaw = args.find((a) => a.startsWith('--delivery-endpoints='))?.slice('--delivery-endpoints='.length) ?? 'one';
if (deliveryEndpointsRaw !== 'one' && deliveryEndpointsRaw !== 'troubled') throw new Error(`--delivery-endpoints=${deliveryEndpointsRaw}: one or troubled`);
const deliveryEndpointsArg: 'one' | 'troubled' = deliveryEndpointsRaw;

const settings = quick
  ? { rounds: 2, durationS: 1.5, warmupS: 1, warmupRequests: 300, wrkRounds: 1, minCallbackRows: 2_000, getOneRows: 10_000, getOneCustomers: 200, longPolls: 200, settleMs: 5_000 }
  : { rounds: 3, durationS: 8, warmupS: 3, warmupRequests: 3_000, wrkRounds: 2, minCallbackRows: 5_000, getOneRows: 100_000, getOneCustomers: 1_000, longPolls: 1_000, settleMs: 15_000 };
/** --rounds=N: measured A/B rounds a side (default 3; more to tell a round's noise from a side's cost). */
const roundsArg = numberArg('rounds', 0);
if (roundsArg > 0) settings.rounds = roundsArg;
const LONG_POLL_WAIT_S = 30;
/**
 * The campaign's provider limit, at the sandbox and the gateways alike (issue 37: 200/s);
 * --campaign-rps=N for another (what the other customers' p99 does as the forwarding rate changes).
 */
const CAMPAIGN_MAX_RPS = numberArg('campaign-rps', 200) || 200;

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url));
/** BENCH_GATEWAY_ENTRY: another build's dist/src/server.js, to compare two builds against the same baselines. */
const GATEWAY_ENTRY = process.env.BENCH_GATEWAY_ENTRY ?? here('../src/server.js');
/** BENCH_GATEWAY_NODE_ARGS (space-separated): other Node flags for the gateway than npm start's, to measure them. */
const NODE_ARGS = process.env.BENCH_GATEWAY_NODE_ARGS?.split(/\s+/).filter(Boolean) ?? GATEWAY_NODE_ARGS;
const BASELINE_ENTRY = here('./baselines/server.js');
const STUB_ENTRY = here('./stub.js');
const PROBE_ENTRY = here('./probe.js');
const RESULTS_DIR = here('../../bench/results/');
const PROFILE_DIR = here('../../bench/results/profiles/');

const say = (line: string) => process.stdout.write(`${line}\n`);

function alphanumeric(length: number): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  return Array.from({ length }, () => alphabet[randomInt(alphabet.length)]).join('');
}

const secrets = { PARTNER_TOKEN: alphanumeric(64), CPF_HASH_KEY: alphanumeric(48), ADMIN_API_KEYS: alphanumeric(40) };

let database: BenchDatabase | undefined;
/** Databases of single scenarios (dropped once the scenario is done, or here). */
const scenarioDatabases = new Set<BenchDatabase>();
let own: OwnPostgres | undefined;
/** Private clusters of single bench states (d), stopped once the state is done, or here. */
const stateClusters = new Set<OwnPostgres>();
let cleaning: Promise<void> | undefined;
function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    await stopAll();
    for (const db of [database, ...scenarioDatabases]) {
      await db?.drop().catch((err: unknown) => say(`could not drop the bench database ${db.name}: ${String(err)}`));
    }
    for (const cluster of [own, ...stateClusters]) {
      await cluster?.stop().catch((err: unknown) => say(`could not stop the benchmark's own PostgreSQL: ${String(err)}`));
    }
  })();
  return cleaning;
}
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    say(`\n${signal}: stopping everything the benchmark started`);
    void cleanup().finally(() => process.exit(130));
  });
}

/** Where a gateway started with --probe appends what it saw inside each run. */
const probeFile = (label: string) => `${RESULTS_DIR}probe-${label}.jsonl`;

async function startGateway(
  database: BenchDatabase,
  providerBaseUrl: string,
  label: string,
  extraEnv: Record<string, string> = {},
  script = GATEWAY_ENTRY,
): Promise<Child> {
  if (probe) await rm(probeFile(label), { force: true });
  return startChild({
    name: script === GATEWAY_ENTRY ? 'gateway' : 'gateway (reference)',
    script,
    nodeArgs: [
      ...NODE_ARGS,
      ...(profile ? ['--cpu-prof', `--cpu-prof-dir=${PROFILE_DIR}`, `--cpu-prof-name=gateway-${label}.cpuprofile`] : []),
      ...(probe ? ['--import', PROBE_ENTRY] : []),
    ],
    readyPath: '/readyz',
    env: {
      ...(probe ? { PROBE_FILE: probeFile(label) } : {}),
      ...(probeProfile ? { PROBE_PROFILE: `${PROFILE_DIR}${label}` } : {}),
      NODE_ENV: 'production',
      LOG_LEVEL: 'warn',
      DATABASE_URL: database.url,
      PROVIDER_BASE_URL: providerBaseUrl,
      ...secrets,
      CALLBACK_ALLOWED_IPS: '127.0.0.1/32',
      // The provider's pace wide open (the configuration's maxima): the baselines forward every
      // submit at once, and the default (50/s) would make the submit A/B and the bench states'
      // loading through the submit API measure the pace instead of the gateway.
      PROVIDER_MAX_RPS: '100000',
      PROVIDER_MAX_IN_FLIGHT: '10000',
      ...extraEnv,
    },
  });
}

/**
 * The gateway exporting every span (default sampler) over OTLP/HTTP protobuf to the stub. Any
 * BENCH_OTEL_<NAME> is passed on as OTEL_<NAME>, to measure another setting (e.g.
 * BENCH_OTEL_TRACES_SAMPLER=parentbased_traceidratio, BENCH_OTEL_BSP_SCHEDULE_DELAY=100).
 */
const tracingEnv = (stubUrl: string) => ({
  OTEL_EXPORTER_OTLP_ENDPOINT: stubUrl,
  OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
  ...Object.fromEntries(
    Object.entries(process.env)
      .filter(([name, value]) => name.startsWith('BENCH_OTEL_') && value !== undefined)
      .map(([name, value]) => [name.slice('BENCH_'.length), value as string]),
  ),
});

/** The other side of a --tracing A/B: the same build with tracing off, or (--tracing=off) the build before tracing. */
function startReference(database: BenchDatabase, stubUrl: string, label: string, env: Record<string, string> = {}): Promise<Child> {
  if (tracingMode !== 'off') return startGateway(database, stubUrl, label, env);
  const before = process.env.BENCH_TRACING_BASE_ENTRY;
  if (!before) throw new Error('--tracing=off needs BENCH_TRACING_BASE_ENTRY: the dist/src/server.js of a build from before tracing');
  // Its migrator would refuse a database that has migrations it does not know: the harness migrated it.
  return startGateway(database, stubUrl, label, { ...env, MIGRATE_ON_START: 'false' }, before);
}

async function startBaseline(database: BenchDatabase, providerBaseUrl: string): Promise<Child> {
  return startChild({
    name: 'baseline',
    script: BASELINE_ENTRY,
    readyPath: '/healthz',
    env: { NODE_ENV: 'production', DATABASE_URL: database.url, PROVIDER_BASE_URL: providerBaseUrl, ...secrets },
  });
}

/**
 * The server's checkpoint write and sync totals (ms), which it adds to when a checkpoint ends:
 * pg_stat_bgwriter's up to PostgreSQL 16, pg_stat_checkpointer's since 17.
 */
async function checkpointTotals(database: BenchDatabase): Promise<CheckpointTimes> {
  let query = checkpointQueries.get(database);
  if (query === undefined) {
    const { rows } = await database.pool.query<{ since17: boolean }>(`select to_regclass('pg_catalog.pg_stat_checkpointer') is not null as since17`);
    query = rows[0]!.since17
      ? 'select write_time::float as w, sync_time::float as s from pg_stat_checkpointer'
      : 'select checkpoint_write_time::float as w, checkpoint_sync_time::float as s from pg_stat_bgwriter';
    checkpointQueries.set(database, query);
  }
  const { rows } = await database.pool.query<{ w: number; s: number }>(query);
  return { writeMs: rows[0]!.w, syncMs: rows[0]!.s };
}
const checkpointQueries = new WeakMap<BenchDatabase, string>();

/** WAL position in bytes: differences are what a run wrote (the whole server's). */
async function walBytes(database: BenchDatabase): Promise<number> {
  const { rows } = await database.pool.query<{ b: string }>(`select pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint as b`);
  return Number(rows[0]?.b ?? 0);
}

let withWrk = false;

/** With push: the gateway pushes its events to a receiver, whose deliveries go out (untimed) after each of its runs. */
interface Push {
  env: Record<string, string>;
  settle: () => Promise<string>;
}

/** The gateway pushing its outcome events to the receiver at `url`; its deliveries drained after each run. */
const pushingTo = (database: BenchDatabase, url: string): Push => ({
  env: { EVENT_WEBHOOK_URLS: url, EVENT_WEBHOOK_SECRET: `whsec_${randomBytes(32).toString('base64')}`, EVENT_WEBHOOK_TIMEOUT_MS: '5000' },
  settle: () => drainDeliveries(database, url),
});

/** How a bench state's A/B differs: its loading once both sides run, no CHECKPOINT, buffers counted, its own goals. */
interface StateHooks {
  /**
   * Once both sides run. `reference` is the other side when it is a gateway too (--tracing): the
   * loading through the API is then split between the two, so that both begin their runs having
   * served the same submits and callbacks (the traced side alone had, until 2026-12-02).
   */
  afterStart: (gateway: Child, reference: Child | undefined) => Promise<void>;
  buffers: () => Promise<number>;
  goals: (result: Awaited<ReturnType<typeof compareAb>>, rss: number | null) => Goal[];
  /** Once the runs are over, the gateway still up: more goals (the statements timed at the state's size). */
  afterRuns?: (gateway: Child) => Promise<Goal[]>;
}

async function abScenario(database: BenchDatabase, stubUrl: string, scenario: AbScenario, push?: Push, state?: StateHooks): Promise<AbReport> {
  say(`\n${scenario.name}: ${scenario.connections} connections, ${settings.rounds} rounds of ${settings.durationS} s per target${push ? ', the gateway pushing outcome events' : ''}`);
  const [gateway, baseline] = await Promise.all([
    startGateway(database, stubUrl, scenario.name, { ...push?.env, ...(tracingMode === 'on' ? tracingEnv(stubUrl) : {}) }),
    tracingMode === undefined ? startBaseline(database, stubUrl) : startReference(database, stubUrl, `${scenario.name}-reference`, push?.env),
  ]);
  const gatewayRss = new RssSampler(gateway.pid);
  const baselineRss = new RssSampler(baseline.pid);
  try {
    const targets = {
      gateway: {
        ...gateway,
        dbCpu: () => backendCpuSnapshot(database, GATEWAY_APPLICATIONS),
        ...(push ? { settle: push.settle } : {}),
        ...(probe ? { probe: probeReader(gateway.pid, probeFile(scenario.name)) } : {}),
      },
      // A reference gateway's backends share the gateway's application name: its DB CPU counts both.
      baseline: {
        ...baseline,
        dbCpu: () => backendCpuSnapshot(database, tracingMode === undefined ? ['bench-baseline'] : GATEWAY_APPLICATIONS),
        // With --tracing the other side is a gateway too, started with the probe.
        ...(probe && tracingMode !== undefined ? { probe: probeReader(baseline.pid, probeFile(`${scenario.name}-reference`)) } : {}),
      },
    };
    await state?.afterStart(gateway, tracingMode === undefined ? undefined : baseline);
    const result = await compareAb(
      scenario,
      targets,
      () => walBytes(database),
      {
        ...settings,
        wrkRounds: withWrk && rateArg === undefined ? settings.wrkRounds : 0,
        ...(rateArg !== undefined ? { rate: Number(rateArg) } : {}),
        // A bench state runs no CHECKPOINT: writeback happens when it happens, as in a deployment.
        ...(state ? { buffers: state.buffers } : { flushWrites: () => flushWrites(database.pool) }),
        checkpoints: () => checkpointTotals(database),
        ...(own && !state ? { statementTotals: () => statementTotals(database.pool) } : {}),
      },
      say,
    );
    const gatewayPeakRssMb = gatewayRss.finish();
    const laterGoals = state?.afterRuns ? await state.afterRuns(gateway) : [];
    return {
      scenario: scenario.name,
      connections: scenario.connections,
      ...result,
      gatewayPeakRssMb,
      baselinePeakRssMb: baselineRss.finish(),
      // With --tracing both sides are this gateway: the tracing goals, in a bench state too (its own
      // goals are against the naive baseline, which does not run then).
      goals:
        tracingMode !== undefined
          ? [...tracingGoals(tracingMode, result), ...laterGoals]
          : state
            ? [...state.goals(result, gatewayPeakRssMb), ...laterGoals]
            : abGoals(scenario.name, result, gatewayPeakRssMb),
    };
  } finally {
    gatewayRss.finish();
    baselineRss.finish();
    await Promise.all([gateway.stop(), baseline.stop()]);
  }
}

/**
 * The callback A/B in one bench state at one size, on a database (and for state d a cluster) of its
 * own: both sides start on the empty tables, the stored requests are loaded through the gateway's
 * API (or in bulk beyond API_LOAD_LIMIT, as the API leaves them), then the state's statistics.
 */
async function callbackInState(run: StateRun, stubUrl: string, adminUrl: string, pushTo?: string): Promise<AbReport> {
  const name = `${pushTo === undefined ? 'callback' : 'callback-push'} [${run.state} ${run.size}]`;
  const cluster = run.state === 'd' ? await startOwnPostgres({ autovacuum: true }) : undefined;
  if (cluster) stateClusters.add(cluster);
  const bench = await createBenchDatabase(cluster?.url ?? own?.url ?? adminUrl);
  scenarioDatabases.add(bench);
  const notes: string[] = [];
  let asLoaded: StatementTiming[] = [];
  try {
    say(`\n${name}: ${STATE_NAMES[run.state]}, ${run.requests} stored requests, on ${cluster ? 'a private cluster, autovacuum on' : own ? 'the private cluster' : 'the shared server'}`);
    await beforeLoading(bench.pool, run.state);
    const push = pushTo === undefined ? undefined : pushingTo(bench, pushTo);
    const report = await abScenario(bench, stubUrl, callbackStateScenario(bench.pool, name), push, {
      afterStart: async (gateway, reference) => {
        const began = performance.now();
        let how = reference ? 'through the API of both sides, half each' : 'through the API';
        // Through the gateway, or (--tracing) half through each side, one after the other.
        const throughApi = async (prefix: string, count: number) => {
          const mine = reference ? Math.ceil(count / 2) : count;
          await loadThroughApi(gateway.baseUrl, prefix, mine);
          if (reference) await loadThroughApi(reference.baseUrl, prefix, count - mine, mine);
        };
        if (run.requests <= API_LOAD_LIMIT) {
          await throughApi('base-', run.requests);
        } else {
          // Go-live through the API while the tables are tiny (the gateway's connections plan then), the rest in bulk.
          await throughApi('golive-', 500);
          // Pushing: the history was pushed as it happened (delivered), not a backlog due at once.
          const pushed = push ? await configuredEndpoints(bench.pool) : [];
          if (push && pushed.length === 0) throw new Error('pushing, but the gateway registered no configured endpoint');
          await loadInBulk(bench.pool, 'base-', run.requests - 500, spreadDays * 86_400, pushed);
          how = `500 through the API${reference ? ' (half through each side)' : ''}, the rest in bulk as the API leaves them`;
          if (spreadDays > 0) {
            const closed = await closePastHours(bench.url);
            how += `, spread over the last ${spreadDays} days (${closed} past hours closed by the gateway's closing pass)`;
          }
        }
        await afterLoading(bench.pool, run.state);
        const stored = await storedRequests(bench.pool);
        notes.push(`${stored} stored requests loaded in ${Math.round((performance.now() - began) / 1000)} s (${how})`);
        say(`  ${notes.at(-1)}`);
        asLoaded = await timeStatistics(gateway.baseUrl, 'as loaded, before the runs');
        for (const line of statementLines(asLoaded)) say(`    ${line}`);
      },
      buffers: () => databaseBuffers(bench.pool),
      goals: (result, rss) => stateGoals(result, rss),
      afterRuns: async (gateway) => {
        const timings = await timeStatements(gateway.baseUrl, bench.url, bench.pool, `${run.state}${run.size}-`, secrets.ADMIN_API_KEYS);
        say(`  statements timed once the runs were over (${await storedRequests(bench.pool)} stored requests), ms per run:`);
        for (const line of statementLines(timings)) say(`    ${line}`);
        return statementGoals([...asLoaded, ...timings]);
      },
    });
    notes.push(`${await storedRequests(bench.pool)} stored requests after the runs`);
    return { ...report, notes: [`${STATE_NAMES[run.state]}: ${notes.join('; ')}`] };
  } finally {
    scenarioDatabases.delete(bench);
    await bench.drop();
    if (cluster) {
      stateClusters.delete(cluster);
      await cluster.stop();
    }
  }
}

async function longPollScenario(database: BenchDatabase, stubUrl: string): Promise<LongPollReport> {
  say(`\nlong-poll: ${settings.longPolls} concurrent GET ?wait=${LONG_POLL_WAIT_S}, then their callbacks`);
  const gateway = await startGateway(database, stubUrl, 'long-poll');
  const rss = new RssSampler(gateway.pid, 50);
  try {
    const round = { waitS: LONG_POLL_WAIT_S, settleMs: settings.settleMs, callbackConcurrency: numberArg('long-poll-callbacks', 32) };
    // A smaller unreported round first, so that the measured one meets warm code, as in production.
    const warm = await runLongPolls(database.pool, gateway.baseUrl, { ...round, prefix: 'lpw-', count: Math.ceil(settings.longPolls / 4) });
    say(`  warm-up: ${warm.count} long-polls, answer after callback p50 ${warm.delayMs.p50} ms`);
    const figures = await runLongPolls(database.pool, gateway.baseUrl, { ...round, prefix: 'lp-', count: settings.longPolls });
    const peak = rss.finish();
    return { scenario: 'long-poll', ...figures, gatewayPeakRssMb: peak, goals: longPollGoals(figures, peak) };
  } finally {
    rss.finish();
    await gateway.stop();
  }
}

interface StatementStats {
  query: string;
  calls: number;
  meanExecMs: number;
  totalExecS: number;
  rowsPerCall: number;
  walBytesPerCall: number;
  walFpiPerCall: number;
}

/** What pg_stat_statements saw on the private cluster during the scenarios (--own-postgres). */
async function topStatements(url: string): Promise<StatementStats[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<StatementStats>(
      `select left(regexp_replace(query, '\\s+', ' ', 'g'), 90) as query, calls::int,
              round(mean_exec_time::numeric, 3)::float as "meanExecMs", round((total_exec_time / 1000)::numeric, 2)::float as "totalExecS",
              round(rows::numeric / calls, 2)::float as "rowsPerCall", round(wal_bytes / calls, 0)::float as "walBytesPerCall",
              round(wal_fpi::numeric / calls, 3)::float as "walFpiPerCall"
       from pg_stat_statements where calls > 100 order by total_exec_time desc limit 12`,
    );
    say('\npg_stat_statements (own PostgreSQL), by total execution time:');
    for (const r of rows) {
      say(`  ${String(r.calls).padStart(7)} calls  ${String(r.meanExecMs).padStart(7)} ms  ${String(r.rowsPerCall).padStart(6)} rows  ${String(r.walBytesPerCall).padStart(7)} WAL B  ${r.query}`);
    }
    return rows;
  } finally {
    await client.end();
  }
}

/** /proc/pressure/cpu "some avg60": the share of time something waited for a CPU, %. */
function cpuPressure(): number | null {
  try {
    const match = /^some avg10=[\d.]+ avg60=([\d.]+)/m.exec(readFileSync('/proc/pressure/cpu', 'utf8'));
    return match ? Number(match[1]) : null;
  } catch {
    return null;
  }
}

/**
 * Cold start to ready: spawn to the first 200 of /readyz (polled every 5 ms), on PostgreSQL (the
 * database already migrated) and on PGlite (an empty data directory, then the same one again).
 */
async function measureColdStart(database: BenchDatabase, stubUrl: string, tries: number): Promise<ColdStart> {
  const result: ColdStart = { postgres: [], pgliteFresh: [], pgliteExisting: [] };
  const base = { LOG_LEVEL: 'warn', PROVIDER_BASE_URL: stubUrl, ...secrets, CALLBACK_ALLOWED_IPS: '127.0.0.1/32' };
  const once = async (env: Record<string, string>) => {
    const child = await startChild({ name: 'gateway (cold start)', script: GATEWAY_ENTRY, nodeArgs: NODE_ARGS, readyPath: '/readyz', readyPollMs: 5, readyTimeoutMs: 120_000, env });
    await child.stop();
    return child.readyMs;
  };
  for (let i = 0; i < tries; i++) {
    result.postgres.push(await once({ ...base, NODE_ENV: 'production', DATABASE_URL: database.url }));
    const dir = await mkdtemp(join(tmpdir(), 'ugw-bench-pglite-'));
    try {
      // NODE_ENV=production requires DATABASE_URL: PGlite is the development engine.
      result.pgliteFresh.push(await once({ ...base, NODE_ENV: 'development', DATA_DIR: dir }));
      result.pgliteExisting.push(await once({ ...base, NODE_ENV: 'development', DATA_DIR: dir }));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }
  return result;
}

async function main(): Promise<void> {
  const startedAt = new Date();
  const adminUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const cpuList = cpus();
  const machine = {
    cores: cpuList.length,
    cpuModel: cpuList[0]?.model ?? 'unknown',
    memoryMb: Math.round(totalmem() / 1024 / 1024),
    node: process.version,
    postgres: '',
    loadAverageAtStart: loadavg().map((v) => Math.round(v * 100) / 100),
  };
  const pressureAtStart = cpuPressure();
  say(`underwriting-gateway benchmark${quick ? ' (quick)' : ''}: ${machine.cores} cores, ${machine.cpuModel}, Node ${machine.node}, load ${machine.loadAverageAtStart.join(' ')}`);

  if (profile || probeProfile) {
    // Profiles are big and machine-specific: the folder ignores itself (bench/results/ tracks only .gitkeep).
    await mkdir(PROFILE_DIR, { recursive: true });
    await writeFile(`${PROFILE_DIR}.gitignore`, '*\n');
  }
  if (probe) await mkdir(RESULTS_DIR, { recursive: true });
  withWrk = await wrkAvailable();
  if (!withWrk) say('wrk not found: no cross-check with a second load generator');
  if (ownPostgres) {
    own = await startOwnPostgres();
    say('on a private PostgreSQL cluster started for this run (WAL and pg_stat_statements are the benchmark\'s own)');
  }
  database = await createBenchDatabase(own?.url ?? adminUrl);
  machine.postgres = database.serverVersion;
  say(`database ${database.name} on ${machine.postgres}`);
  const stub = await startChild({ name: 'provider stub', script: STUB_ENTRY, readyPath: '/healthz', env: {} });

  const ab: AbReport[] = [];
  if (wanted('callback')) {
    const inStates: Array<{ key: string; size: string; report: AbReport }> = [];
    const receiver = statePushModes.includes(true) ? await startReceiver() : undefined;
    try {
      for (const run of states) {
        for (const pushed of statePushModes) {
          const report = await callbackInState(run, stub.baseUrl, adminUrl, pushed ? receiver!.url : undefined);
          inStates.push({ key: `${run.state}${pushed ? ' push' : ''}`, size: run.size, report });
          ab.push(report);
        }
      }
    } finally {
      await receiver?.close();
    }
    // Buffers per callback flat across sizes: judged on each state's (and push mode's) largest size.
    for (const key of new Set(inStates.map((s) => s.key))) {
      const bySize = inStates.filter((s) => s.key === key);
      bySize.at(-1)!.report.goals.push(buffersFlatGoal(bySize.map((s) => ({ size: s.size, buffersPerOk: s.report.gateway.buffersPerOk }))));
    }
  }
  if (wanted('callback-push')) {
    // The same callbacks against a gateway with webhooks configured: the goals hold with push on too.
    // On a database of its own, as `callback` had: after `callback` on the same one, it met twice the
    // rows, and its baseline was slower too (more WAL per callback, worse p99).
    const pushDatabase = wanted('callback') ? await createBenchDatabase(own?.url ?? adminUrl) : database;
    if (pushDatabase !== database) scenarioDatabases.add(pushDatabase);
    const receiver = await startReceiver();
    try {
      const push = pushingTo(pushDatabase, receiver.url);
      ab.push(await abScenario(pushDatabase, stub.baseUrl, { ...callbackScenario(pushDatabase.pool, { minRows: settings.minCallbackRows }), name: 'callback-push' }, push));
    } finally {
      await receiver.close();
      if (pushDatabase !== database) {
        scenarioDatabases.delete(pushDatabase);
        await pushDatabase.drop();
      }
    }
  }
  if (wanted('submit')) ab.push(await abScenario(database, stub.baseUrl, submitScenario()));
  if (wanted('get-one')) {
    say(`\nseeding ${settings.getOneRows} requests (${settings.getOneCustomers} customers read, 3 requests each)`);
    await seedGetOne(database.pool, { rows: settings.getOneRows, customers: settings.getOneCustomers });
    ab.push(await abScenario(database, stub.baseUrl, getOneScenario({ customers: settings.getOneCustomers })));
  }
  const longPoll = wanted('long-poll') ? await longPollScenario(database, stub.baseUrl) : undefined;
  const bench = database;
  const delivery: DeliveryReport | undefined = wanted('delivery')
    ? await deliveryScenario(bench, (env, label) => startGateway(bench, stub.baseUrl, label, env), {
        rate: numberArg('delivery-rate', 500),
        durationS: settings.durationS,
        warmupS: settings.warmupS,
        settleMs: settings.settleMs,
        ab: settings,
        minCallbackRows: settings.minCallbackRows,
        endpoints: deliveryEndpointsArg,
      }, say)
    : undefined;
  let statements: StatementStats[] | undefined;
  if (own) statements = await topStatements(own.url);

  // The campaign (issue 37's figures) only when --only names it: at 100,000 lines it forwards for
  // over 8 minutes at 200/s, besides its faults.
  let campaign: CampaignReport | undefined;
  if (only?.has('campaign')) {
    const lines = numberArg('lines', 100_000);
    say(`\ncampaign: ${lines} lines at ${CAMPAIGN_MAX_RPS}/s across 2 gateway instances, kill -9 and a ${numberArg('outage-s', 30)} s provider outage`);
    campaign = await runCampaignScenario({
      adminUrl: own?.url ?? adminUrl,
      lines,
      maxRps: CAMPAIGN_MAX_RPS,
      outageS: numberArg('outage-s', 30),
      windowS: quick ? 2 : 10,
      gatewayEntry: GATEWAY_ENTRY,
      // npm start's (and the image's) Node flags, as every other gateway the bench starts.
      nodeArgs: NODE_ARGS,
      ...(probe ? { probeEntry: PROBE_ENTRY } : {}),
      say,
    });
  }
  let coldStart: ColdStart | undefined;
  // Cold start runs by default in full runs; in --quick only when asked for (PGlite's first start
  // alone takes 10-60 s on this machine).
  if (quick ? only?.has('cold-start') === true : wanted('cold-start')) {
    say('\ncold start to ready, PostgreSQL and PGlite');
    coldStart = await measureColdStart(database, stub.baseUrl, quick ? 1 : 3);
  }
  const noise: Noise = {
    loadAverageAtStart: machine.loadAverageAtStart,
    loadAverageAtEnd: loadavg().map((v) => Math.round(v * 100) / 100),
    cpuPressureAtStart: pressureAtStart,
    cpuPressureAtEnd: cpuPressure(),
  };

  const text =
    renderReport(ab, longPoll, coldStart, noise) + (delivery ? `\n${renderDelivery(delivery)}\n` : '') + (campaign ? `\n${renderCampaign(campaign).join('\n')}\n` : '');
  say(`\n${text}`);
  const finishedAt = new Date();
  const json = {
    startedAt: startedAt.toISOString(),
    finishedAt: finishedAt.toISOString(),
    quick,
    machine: { ...machine, loadAverageAtEnd: loadavg().map((v) => Math.round(v * 100) / 100) },
    settings: { ...settings, longPollWaitS: LONG_POLL_WAIT_S, gatewayPoolSize: 10, baselinePoolSize: 10, states },
    scenarios: ab,
    longPoll: longPoll ?? null,
    coldStart: coldStart ?? null,
    statements: statements ?? null,
    noise,
    delivery: delivery ?? null,
    campaign: campaign ?? null,
    missed: [...ab, ...(longPoll ? [longPoll] : []), ...(delivery ? [delivery] : [])].flatMap((r) => r.goals.filter((g) => g.met === false).map((g) => `${r.scenario}: ${g.goal} (${g.measured})`)),
    notJudged: ab.flatMap((r) => r.goals.filter((g) => g.met === null).map((g) => `${r.scenario}: ${g.goal} (${g.measured})`)),
  };
  await mkdir(RESULTS_DIR, { recursive: true });
  await writeFile(`${RESULTS_DIR}latest.json`, `${JSON.stringify(json, null, 2)}\n`);
  say(`results written to bench/results/latest.json (${Math.round((finishedAt.getTime() - startedAt.getTime()) / 1000)} s)`);
}

try {
  await main();
  await cleanup();
  process.exit(0);
} catch (err) {
  say(`benchmark harness failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  await cleanup();
  process.exit(1);
}
