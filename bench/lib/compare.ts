import { type LoadSpec, type RunFigures, runLoad } from './load.js';
import { cpuTimeMs } from './processes.js';

// Side-by-side runs on one noisy machine: both targets warm up, then alternate A B A B ... so
// that drift (other work on the machine, table growth, autovacuum) hits both alike.

export type TargetName = 'gateway' | 'baseline';

export interface RunContext {
  target: TargetName;
  /** Unique per run in the whole benchmark: a prefix for the data the run needs. */
  runId: string;
  durationS: number;
  /** Highest responses/s seen so far in this scenario, to size the data a run needs. */
  rateHint: number | undefined;
}

export type PreparedLoad = Pick<LoadSpec, 'build' | 'limit' | 'headers'>;

export interface AbScenario {
  name: string;
  connections: number;
  /** Untimed: seeds what one run needs and says what it sends. */
  prepare(run: RunContext): Promise<PreparedLoad>;
}

export interface AbSettings {
  rounds: number;
  durationS: number;
  warmupS: number;
  /** Warm-up runs repeat (at most 3) until the target has answered this many requests. */
  warmupRequests: number;
}

export interface MeasuredRun extends RunFigures {
  /** CPU (user + system) the target process spent per 2xx answer: steadier than req/s on a shared machine. */
  cpuMsPerOk: number | null;
  /** CPU of the PostgreSQL backends serving the target, per 2xx answer. */
  dbCpuMsPerOk: number | null;
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
}

export interface AbResult {
  gateway: TargetFigures;
  baseline: TargetFigures;
  /** gateway rps / baseline rps over all measured runs. */
  ratio: number;
  /** The same ratio round by round, to show how much the machine moved. */
  roundRatios: number[];
  /** gateway CPU per answer / baseline CPU per answer (lower is better for the gateway). */
  cpuRatio: number | null;
}

let runCounter = 0;

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
  };
}

const ratioOf = (a: number, b: number) => (b > 0 ? Math.round((a / b) * 1000) / 1000 : 0);

export async function compareAb(
  scenario: AbScenario,
  targets: Record<TargetName, { baseUrl: string; pid: number; dbCpuMs: () => Promise<number | null> }>,
  settings: AbSettings,
  progress: (line: string) => void,
): Promise<AbResult> {
  let rateHint: number | undefined;
  const once = async (target: TargetName, durationS: number): Promise<MeasuredRun> => {
    const runId = `${scenario.name.slice(0, 2)}${++runCounter}-`;
    const prepared = await scenario.prepare({ target, runId, durationS, rateHint });
    const { baseUrl, pid, dbCpuMs } = targets[target];
    const [cpuBefore, dbBefore] = [cpuTimeMs(pid), await dbCpuMs()];
    const load = await runLoad({ ...prepared, baseUrl, connections: scenario.connections, durationS });
    const [cpuAfter, dbAfter] = [cpuTimeMs(pid), await dbCpuMs()];
    const per = (before: number | null, after: number | null) =>
      before === null || after === null || load.ok === 0 ? null : Math.round(((after - before) / load.ok) * 1000) / 1000;
    const figures = { ...load, cpuMsPerOk: per(cpuBefore, cpuAfter), dbCpuMsPerOk: per(dbBefore ?? 0, dbAfter) };
    // Sized on every answer, not only 2xx: a fast error path must not outrun the seeded rows.
    rateHint = Math.max(rateHint ?? 0, figures.durationS > 0 ? figures.requests / figures.durationS : 0);
    return figures;
  };

  const order: TargetName[] = ['gateway', 'baseline'];
  // Warm up until the JIT has seen enough requests (a time alone is too few on a busy machine).
  for (const target of order) {
    let answered = 0;
    for (let attempt = 0; attempt < 3 && answered < settings.warmupRequests; attempt++) {
      const w = await once(target, settings.warmupS);
      answered += w.requests;
      progress(`  warm-up ${target}: ${w.rps} req/s, cpu ${w.cpuMsPerOk ?? '-'} ms/req`);
    }
  }
  const runs: Record<TargetName, MeasuredRun[]> = { gateway: [], baseline: [] };
  for (let round = 0; round < settings.rounds; round++) {
    for (const target of order) {
      const r = await once(target, settings.durationS);
      runs[target].push(r);
      progress(
        `  round ${round + 1} ${target.padEnd(8)} ${String(r.rps).padStart(8)} req/s  p50 ${r.p50} ms  p99 ${r.p99} ms  cpu ${r.cpuMsPerOk ?? '-'} ms/req, db ${r.dbCpuMsPerOk ?? '-'}` +
          (r.non2xx + r.errors > 0 ? `  non-2xx ${r.non2xx} errors ${r.errors} ${JSON.stringify(r.statusCodes)}` : '') +
          (r.exhausted ? '  (ran out of seeded rows)' : ''),
      );
    }
  }
  const gateway = summarise(runs.gateway);
  const baseline = summarise(runs.baseline);
  return {
    gateway,
    baseline,
    ratio: ratioOf(gateway.rps, baseline.rps),
    roundRatios: runs.gateway.map((g, i) => ratioOf(g.rps, runs.baseline[i]?.rps ?? 0)),
    cpuRatio: gateway.cpuMsPerOk === null || baseline.cpuMsPerOk === null ? null : ratioOf(gateway.cpuMsPerOk, baseline.cpuMsPerOk),
  };
}
