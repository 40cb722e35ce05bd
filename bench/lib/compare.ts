import { backendCpuBetween, type BusyStatement, busiestStatements, describeStatement, type StatementTotals } from './database.js';
import { type LoadSpec, type RunFigures, runLoad } from './load.js';
import { cpuTimeMs, type SchedTimes, schedPerSecond, schedTimesOf } from './processes.js';
import { describeProbe, type ProbeFigures } from './probe.js';
import { runWrk, type WrkSpec } from './wrk.js';

// Side-by-side runs on one noisy machine: both targets warm up (B, A, then B once more for a
// round's length, so that each measured run follows one run of the other's), then alternate A B A B ... so
// that drift (other work on the machine, table growth, autovacuum) hits both alike.

export type TargetName = 'gateway' | 'baseline';

export interface RunContext {
  target: TargetName;
  /** Unique per run in the whole benchmark: a prefix for the data the run needs. */
  runId: string;
  durationS: number;
  generator: Generator;
  /** Highest responses/s seen so far in this scenario, to size the data a run needs. */
  rateHint: number | undefined;
}

export type PreparedLoad = Pick<LoadSpec, 'build' | 'limit' | 'headers'> & {
  /** Set when the scenario can also be driven by wrk (the cross-check). */
  wrk?: WrkSpec;
};

export type Generator = 'autocannon' | 'wrk';

export interface AbScenario {
  name: string;
  connections: number;
  /** True when prepare() also says how wrk drives it (PreparedLoad.wrk). */
  wrk?: boolean;
  /** Untimed: seeds what one run needs and says what it sends. */
  prepare(run: RunContext): Promise<PreparedLoad>;
}

export interface AbSettings {
  rounds: number;
  durationS: number;
  warmupS: number;
  /**
   * Warm-up runs repeat until the target has answered this many requests: at most 3 runs, or at an
   * offered rate (--rate) as many as that rate needs to reach it (200/s: 5 runs of 3 s for 3,000).
   */
  warmupRequests: number;
  /** Rounds of the wrk cross-check after autocannon's (scenarios that support it). */
  wrkRounds: number;
  /** --rate: every autocannon run offers this many requests per second (CPU per answer at equal load). */
  rate?: number;
  /**
   * Untimed, before each run once its data is seeded: writes out what earlier runs and the seeding
   * dirtied (a CHECKPOINT), so that no run pays for another's writeback.
   */
  flushWrites?: () => Promise<void>;
  /** Each statement's totals so far in the scenario's database (`--own-postgres` only). */
  statementTotals?: () => Promise<Map<string, StatementTotals>>;
  /** Shared buffers the scenario's database has counted so far (bench states): a run's buffers per 2xx answer. */
  buffers?: () => Promise<number>;
  /** The server's checkpoint totals so far: which runs a checkpoint ended in (bench states). */
  checkpoints?: () => Promise<CheckpointTimes>;
}

/**
 * Checkpoints' write and sync phases, in ms (a sync phase is when every dirty file is fsynced, and
 * commits' WAL flushes queue behind it): pg_stat_bgwriter's (PostgreSQL 17: pg_stat_checkpointer's)
 * totals, which the server adds to when a checkpoint ends, or what ended between two readings.
 */
export interface CheckpointTimes {
  writeMs: number;
  syncMs: number;
}

/** "a checkpoint ended (sync 262 ms)", or nothing when none did. */
export function describeCheckpoint(ended: CheckpointTimes | null | undefined): string {
  return ended ? `  checkpoint ended (write ${Math.round(ended.writeMs / 1000)} s, sync ${Math.round(ended.syncMs)} ms)` : '';
}

export interface MeasuredRun extends RunFigures {
  /** CPU (user + system) the target process spent per 2xx answer: steadier than req/s on a shared machine. */
  cpuMsPerOk: number | null;
  /** CPU of the PostgreSQL backends serving the target, per 2xx answer. */
  dbCpuMsPerOk: number | null;
  /** WAL written during the run per 2xx answer (the whole server's: exact only on --own-postgres). */
  walBytesPerOk: number | null;
  /** Shared buffers (hit + read) the database counted during the run per 2xx answer (bench states only). */
  buffersPerOk?: number | null;
  /** The checkpoints that ended during the run (bench states only; null: none did). */
  checkpoint?: CheckpointTimes | null;
  /** What the gateway saw from inside during the run (`--probe`). */
  inside?: ProbeFigures | null;
  /**
   * Per second of the run, how long each party was on a CPU and how long it was ready to run but
   * waiting for one: the target process (all its threads), the PostgreSQL backends serving it, and
   * the generator when it runs in this process (autocannon; null for wrk). Null without /proc.
   */
  scheduler: { target: SchedTimes | null; database: SchedTimes | null; generator: SchedTimes | null };
  /** The target's statements that took the most execution time during the run (`--own-postgres`). */
  statements?: BusyStatement[];
}

export interface TargetFigures {
  runs: MeasuredRun[];
  /** Total 2xx over total time of the measured runs. */
  rps: number;
  /** Median of the runs' p50; the worst run's p99 and max. */
  p50: number;
  p99: number;
  max: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  exhausted: boolean;
  cpuMsPerOk: number | null;
  dbCpuMsPerOk: number | null;
  walBytesPerOk: number | null;
  /** Bench states only. */
  buffersPerOk?: number | null;
}

export interface WrkCrossCheck {
  gateway: MeasuredRun[];
  baseline: MeasuredRun[];
  ratio: number;
  roundRatios: number[];
}

export interface AbResult {
  gateway: TargetFigures;
  baseline: TargetFigures;
  /** gateway rps / baseline rps over all measured runs. */
  ratio: number;
  /** The same ratio round by round, to show how much the machine moved. */
  roundRatios: number[];
  /** Median of the round ratios: what a noisy machine moves least. */
  medianRatio: number;
  /** gateway CPU per answer / baseline CPU per answer (lower is better for the gateway). */
  cpuRatio: number | null;
  /** The same targets driven by wrk, A B A B, when the scenario supports it. */
  wrk: WrkCrossCheck | null;
}

let runCounter = 0;

/** "on a CPU / waiting for one" per second of the run, for each party that /proc told about. */
export function describeScheduler(scheduler: MeasuredRun['scheduler']): string {
  const parts = (
    [
      ['process', scheduler.target],
      ['its backends', scheduler.database],
      ['generator', scheduler.generator],
    ] as const
  ).flatMap(([name, t]) => (t === null ? [] : [`${name} ${t.runMs}/${t.waitMs}`]));
  return parts.length === 0 ? 'scheduler: not known here' : `ms per s on a CPU / ready but waiting for one: ${parts.join(', ')}`;
}

function summarise(runs: MeasuredRun[]): TargetFigures {
  const perOk = (pick: (r: MeasuredRun) => number | null): number | null => {
    if (!runs.every((r) => pick(r) !== null)) return null;
    const v = runs.reduce((s, r) => s + (pick(r) ?? 0) * r.ok, 0) / Math.max(1, runs.reduce((s, r) => s + r.ok, 0));
    return Math.round(v * 1000) / 1000;
  };
  const sorted = runs.map((r) => r.p50).sort((a, b) => a - b);
  const ok = runs.reduce((s, r) => s + r.ok, 0);
  const time = runs.reduce((s, r) => s + r.durationS, 0);
  return {
    runs,
    rps: time > 0 ? Math.round((ok / time) * 10) / 10 : 0,
    p50: sorted[Math.floor(sorted.length / 2)] ?? 0,
    p99: Math.max(0, ...runs.map((r) => r.p99)),
    max: Math.max(0, ...runs.map((r) => r.max)),
    non2xx: runs.reduce((s, r) => s + r.non2xx, 0),
    errors: runs.reduce((s, r) => s + r.errors, 0),
    timeouts: runs.reduce((s, r) => s + r.timeouts, 0),
    exhausted: runs.some((r) => r.exhausted),
    cpuMsPerOk: perOk((r) => r.cpuMsPerOk),
    dbCpuMsPerOk: perOk((r) => r.dbCpuMsPerOk),
    walBytesPerOk: perOk((r) => r.walBytesPerOk),
    buffersPerOk: perOk((r) => r.buffersPerOk ?? null),
  };
}

export function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  if (s.length === 0) return 0;
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}

export interface TargetHandle {
  baseUrl: string;
  pid: number;
  /** CPU so far of each PostgreSQL backend serving the target, by pid. */
  dbCpu: () => Promise<Map<number, number> | null>;
  /**
   * Untimed, after each of the target's runs: waits until the work the run left behind is done
   * (so that it does not run during the other target's round), and says how long that took.
   */
  settle?: () => Promise<string>;
  /** Untimed, before each of the target's runs (after its rows are seeded). */
  before?: () => Promise<void>;
  /** What the target saw from inside since it was last asked (`--probe`). */
  probe?: () => Promise<ProbeFigures | null>;
}

/** What ended between two readings of the totals; null when no checkpoint did. */
function checkpointsBetween(before: CheckpointTimes, after: CheckpointTimes): CheckpointTimes | null {
  const ended = { writeMs: after.writeMs - before.writeMs, syncMs: after.syncMs - before.syncMs };
  return ended.writeMs > 0 || ended.syncMs > 0 ? ended : null;
}

const ratioOf = (a: number, b: number) => (b > 0 ? Math.round((a / b) * 1000) / 1000 : 0);

export async function compareAb(
  scenario: AbScenario,
  targets: Record<TargetName, TargetHandle>,
  walBytes: () => Promise<number>,
  settings: AbSettings,
  progress: (line: string) => void,
): Promise<AbResult> {
  let rateHint: number | undefined;
  const once = async (target: TargetName, durationS: number, generator: Generator = 'autocannon'): Promise<MeasuredRun> => {
    const runId = `${scenario.name.slice(0, 2)}${++runCounter}-`;
    const prepared = await scenario.prepare({ target, runId, durationS, rateHint, generator });
    await targets[target].before?.();
    await settings.flushWrites?.();
    const { baseUrl, pid, dbCpu, probe } = targets[target];
    await probe?.();
    const [cpuBefore, dbBefore, walBefore] = [cpuTimeMs(pid), await dbCpu(), await walBytes()];
    const statementsBefore = await settings.statementTotals?.();
    const buffersBefore = await settings.buffers?.();
    const checkpointsBefore = await settings.checkpoints?.();
    const schedBefore = schedTimesOf([pid, process.pid, ...(dbBefore?.keys() ?? [])]);
    const load =
      generator === 'wrk' && prepared.wrk
        ? await runWrk(baseUrl, scenario.connections, durationS, prepared.wrk)
        : await runLoad({ ...prepared, baseUrl, connections: scenario.connections, durationS, ...(settings.rate !== undefined ? { rate: settings.rate } : {}) });
    const schedAfter = schedTimesOf([pid, process.pid]);
    const [cpuAfter, dbAfter, walAfter] = [cpuTimeMs(pid), await dbCpu(), await walBytes()];
    // Read as the load ends, before the wait for buffers below: a checkpoint that ends in that idle second is not the round's.
    const checkpointsAfter = checkpointsBefore && (await settings.checkpoints?.());
    const dbSchedAfter = schedTimesOf(dbAfter?.keys() ?? []);
    const only = (times: Map<number, SchedTimes>, pids: number[]) => new Map([...times].filter(([p]) => pids.includes(p)));
    const scheduler = {
      target: schedPerSecond(only(schedBefore, [pid]), only(schedAfter, [pid]), load.durationS),
      database: schedPerSecond(schedBefore, dbSchedAfter, load.durationS),
      generator: generator === 'wrk' ? null : schedPerSecond(only(schedBefore, [process.pid]), only(schedAfter, [process.pid]), load.durationS),
    };
    const statementsAfter = statementsBefore && (await settings.statementTotals?.());
    // Backends report their buffer counts when they go idle, within a second of it.
    const buffersAfter = settings.buffers ? await new Promise((resolve) => setTimeout(resolve, 1_100)).then(settings.buffers) : undefined;
    const inside = await probe?.();
    const per = (used: number | null, digits = 1000) => (used === null || load.ok === 0 ? null : Math.round((used / load.ok) * digits) / digits);
    const figures = {
      ...load,
      cpuMsPerOk: per(cpuBefore === null || cpuAfter === null ? null : cpuAfter - cpuBefore),
      dbCpuMsPerOk: per(backendCpuBetween(dbBefore, dbAfter)),
      walBytesPerOk: per(walAfter - walBefore, 1),
      ...(buffersBefore !== undefined && buffersAfter !== undefined ? { buffersPerOk: per(buffersAfter - buffersBefore, 10) } : {}),
      ...(checkpointsBefore && checkpointsAfter ? { checkpoint: checkpointsBetween(checkpointsBefore, checkpointsAfter) } : {}),
      scheduler,
      ...(statementsBefore && statementsAfter ? { statements: busiestStatements(statementsBefore, statementsAfter, 4) } : {}),
      ...(inside === undefined ? {} : { inside }),
    };
    // Sized on every answer, not only 2xx: a fast error path must not outrun the seeded rows.
    rateHint = Math.max(rateHint ?? 0, figures.durationS > 0 ? figures.requests / figures.durationS : 0);
    const settle = targets[target].settle;
    if (settle) progress(`    ${target} settled: ${await settle()}`);
    return figures;
  };

  const order: TargetName[] = ['gateway', 'baseline'];
  // Warm up until the JIT has seen enough requests (a time alone is too few on a busy machine). At an
  // offered rate three runs could not reach the count (200/s: 1,800 of 3,000).
  const warmupRuns = settings.rate === undefined ? 3 : Math.max(3, Math.ceil(settings.warmupRequests / (settings.rate * settings.warmupS)) + 1);
  // The baseline warms up first, then the gateway, then the baseline runs once more for a round's
  // length, unmeasured: so the gateway's first round, like every later one of either side, follows
  // one round of the other side's. (The gateway's first round used to follow the baseline's whole
  // warm-up, 15 s and more of idling at an offered rate, and cost it most of any: docs/tracing.md, Cost.)
  for (const target of [...order].reverse()) {
    let answered = 0;
    for (let attempt = 0; attempt < warmupRuns && answered < settings.warmupRequests; attempt++) {
      const w = await once(target, settings.warmupS);
      answered += w.requests;
      progress(`  warm-up ${target}: ${w.rps} req/s, cpu ${w.cpuMsPerOk ?? '-'} ms/req`);
    }
  }
  const leadIn = await once('baseline', settings.durationS);
  progress(`  lead-in baseline (unmeasured, a round's length): ${leadIn.rps} req/s, cpu ${leadIn.cpuMsPerOk ?? '-'} ms/req`);
  const runs: Record<TargetName, MeasuredRun[]> = { gateway: [], baseline: [] };
  for (let round = 0; round < settings.rounds; round++) {
    for (const target of order) {
      const r = await once(target, settings.durationS);
      runs[target].push(r);
      progress(
        `  round ${round + 1} ${target.padEnd(8)} ${String(r.rps).padStart(8)} req/s  p50 ${r.p50} ms  p99 ${r.p99} ms  cpu ${r.cpuMsPerOk ?? '-'} ms/req, db ${r.dbCpuMsPerOk ?? '-'}` +
          (r.non2xx + r.errors > 0 ? `  non-2xx ${r.non2xx} errors ${r.errors} ${JSON.stringify(r.statusCodes)}` : '') +
          (r.exhausted ? '  (ran out of seeded rows)' : '') +
          describeCheckpoint(r.checkpoint),
      );
      if (r.secondP99.length > 0) progress(`    ${target} p99 by second: ${r.secondP99.join(', ')} ms`);
      progress(`    ${target} ${describeScheduler(r.scheduler)}`);
      for (const statement of r.statements ?? []) progress(`    ${target} statement ${describeStatement(statement)}`);
      if (r.inside) progress(`    ${target} ${describeProbe(r.inside)}`);
    }
  }
  const gateway = summarise(runs.gateway);
  const baseline = summarise(runs.baseline);
  const roundRatios = runs.gateway.map((g, i) => ratioOf(g.rps, runs.baseline[i]?.rps ?? 0));

  let wrk: WrkCrossCheck | null = null;
  if (settings.wrkRounds > 0 && scenario.wrk === true) {
    wrk = { gateway: [], baseline: [], ratio: 0, roundRatios: [] };
    for (let round = 0; round < settings.wrkRounds; round++) {
      for (const target of order) {
        const r = await once(target, settings.durationS, 'wrk');
        wrk[target].push(r);
        progress(`  wrk ${round + 1} ${target.padEnd(8)} ${String(r.rps).padStart(8)} req/s  p50 ${r.p50} ms  p99 ${r.p99} ms  cpu ${r.cpuMsPerOk ?? '-'} ms/req, db ${r.dbCpuMsPerOk ?? '-'}${r.non2xx + r.errors > 0 ? `  non-2xx ${r.non2xx} errors ${r.errors}` : ''}${describeCheckpoint(r.checkpoint)}`);
        progress(`    ${target} ${describeScheduler(r.scheduler)}`);
        for (const statement of r.statements ?? []) progress(`    ${target} statement ${describeStatement(statement)}`);
        if (r.inside) progress(`    ${target} ${describeProbe(r.inside)}`);
      }
    }
    const total = (rs: RunFigures[]) => rs.reduce((s, r) => s + r.ok, 0) / Math.max(1e-9, rs.reduce((s, r) => s + r.durationS, 0));
    wrk.ratio = ratioOf(total(wrk.gateway), total(wrk.baseline));
    wrk.roundRatios = wrk.gateway.map((g, i) => ratioOf(g.rps, wrk!.baseline[i]?.rps ?? 0));
  }
  return {
    gateway,
    baseline,
    ratio: ratioOf(gateway.rps, baseline.rps),
    roundRatios,
    medianRatio: Math.round(median(roundRatios) * 1000) / 1000,
    wrk,
    cpuRatio: gateway.cpuMsPerOk === null || baseline.cpuMsPerOk === null ? null : ratioOf(gateway.cpuMsPerOk, baseline.cpuMsPerOk),
  };
}
