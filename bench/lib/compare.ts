import { type LoadSpec, type RunFigures, runLoad } from './load.js';

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
}

export interface TargetFigures {
  runs: RunFigures[];
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
}

export interface AbResult {
  gateway: TargetFigures;
  baseline: TargetFigures;
  /** gateway rps / baseline rps over all measured runs. */
  ratio: number;
  /** The same ratio round by round, to show how much the machine moved. */
  roundRatios: number[];
}

let runCounter = 0;

function summarise(runs: RunFigures[]): TargetFigures {
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
  };
}

const ratioOf = (a: number, b: number) => (b > 0 ? Math.round((a / b) * 1000) / 1000 : 0);

export async function compareAb(
  scenario: AbScenario,
  urls: Record<TargetName, string>,
  settings: AbSettings,
  progress: (line: string) => void,
): Promise<AbResult> {
  let rateHint: number | undefined;
  const once = async (target: TargetName, durationS: number): Promise<RunFigures> => {
    const runId = `${scenario.name.slice(0, 2)}${++runCounter}-`;
    const prepared = await scenario.prepare({ target, runId, durationS, rateHint });
    const figures = await runLoad({ ...prepared, baseUrl: urls[target], connections: scenario.connections, durationS });
    // Sized on every answer, not only 2xx: a fast error path must not outrun the seeded rows.
    rateHint = Math.max(rateHint ?? 0, figures.durationS > 0 ? figures.requests / figures.durationS : 0);
    return figures;
  };

  const order: TargetName[] = ['gateway', 'baseline'];
  for (const target of order) {
    const w = await once(target, settings.warmupS);
    progress(`  warm-up ${target}: ${w.rps} req/s`);
  }
  const runs: Record<TargetName, RunFigures[]> = { gateway: [], baseline: [] };
  for (let round = 0; round < settings.rounds; round++) {
    for (const target of order) {
      const r = await once(target, settings.durationS);
      runs[target].push(r);
      progress(
        `  round ${round + 1} ${target.padEnd(8)} ${String(r.rps).padStart(8)} req/s  p50 ${r.p50} ms  p99 ${r.p99} ms` +
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
  };
}
