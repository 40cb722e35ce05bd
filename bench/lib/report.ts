import type { AbResult, MeasuredRun } from './compare.js';
import type { LongPollFigures } from '../scenarios/long-poll.js';

// The goals beside the figures: a goal missed is printed as MISSED, never hidden.

export interface Goal {
  goal: string;
  measured: string;
  /** null: not judged (what it needs was not run). */
  met: boolean | null;
}

/** How a goal reads in the report. */
export const verdict = (g: Goal): string => (g.met === null ? 'not judged' : g.met ? 'met' : 'MISSED');

export interface AbReport extends AbResult {
  scenario: string;
  connections: number;
  gatewayPeakRssMb: number | null;
  baselinePeakRssMb: number | null;
  goals: Goal[];
  /** What the report says under the table about this A/B (a bench state's loading, its table sizes). */
  notes?: string[];
}

export interface LongPollReport extends LongPollFigures {
  scenario: 'long-poll';
  gatewayPeakRssMb: number | null;
  goals: Goal[];
}

export const RSS_GOAL_MB = 200;

const fmt = (v: number) => (Number.isFinite(v) ? String(v) : '-');

export function rssGoal(peak: number | null): Goal {
  return { goal: `gateway RSS <= ${RSS_GOAL_MB} MB`, measured: peak === null ? 'unknown' : `${peak} MB`, met: peak !== null && peak <= RSS_GOAL_MB };
}

/** The callback scenario, push off ('callback') or on ('callback-push'): the same goals. */
const isCallback = (scenario: string) => scenario === 'callback' || scenario === 'callback-push';

export function abGoals(scenario: string, r: AbResult, rss: number | null): Goal[] {
  const ratio: Goal = (() => {
    const min = isCallback(scenario) ? 1.5 : scenario === 'submit' ? 1.0 : 1.5;
    return { goal: `throughput >= ${min.toFixed(1)}x baseline (median of rounds)`, measured: `${r.medianRatio}x`, met: r.medianRatio >= min };
  })();
  const goals = [ratio];
  if (r.wrk) goals.push({ goal: `the same under wrk`, measured: `${r.wrk.ratio}x`, met: r.wrk.ratio >= (isCallback(scenario) ? 1.5 : 1.0) });
  if (isCallback(scenario)) {
    goals.push({ goal: 'p99 <= 30 ms', measured: `${r.gateway.p99} ms`, met: r.gateway.p99 <= 30 });
    const bad = r.gateway.non2xx + r.gateway.errors + r.gateway.timeouts;
    goals.push({ goal: 'zero non-2xx', measured: String(bad), met: bad === 0 });
    // "Lead under both" generators: the latency goals too, judged on wrk's worst round.
    if (r.wrk && r.wrk.gateway.length > 0) {
      const p99 = Math.max(...r.wrk.gateway.map((run) => run.p99));
      goals.push({ goal: 'p99 <= 30 ms under wrk (worst round)', measured: `${p99} ms`, met: p99 <= 30 });
      const wrkBad = r.wrk.gateway.reduce((n, run) => n + run.non2xx + run.errors + run.timeouts, 0);
      goals.push({ goal: 'zero non-2xx under wrk', measured: String(wrkBad), met: wrkBad === 0 });
    }
  }
  goals.push(rssGoal(rss));
  return goals;
}

/** Issue 34's goals for the callback A/B in each bench state, under both generators. */
export const STATE_GOALS = { ratio: 2.0, p99Ms: 25, buffersFlat: 1.5 } as const;

export function stateGoals(r: AbResult, rss: number | null): Goal[] {
  const goals: Goal[] = [
    { goal: `throughput >= ${STATE_GOALS.ratio.toFixed(1)}x baseline (median of rounds)`, measured: `${r.medianRatio}x`, met: r.medianRatio >= STATE_GOALS.ratio },
    { goal: `p99 <= ${STATE_GOALS.p99Ms} ms (worst round)`, measured: `${r.gateway.p99} ms${checkpointsOver(r.gateway.runs, STATE_GOALS.p99Ms)}`, met: r.gateway.p99 <= STATE_GOALS.p99Ms },
  ];
  const bad = r.gateway.non2xx + r.gateway.errors + r.gateway.timeouts;
  goals.push({ goal: 'zero non-2xx', measured: String(bad), met: bad === 0 });
  if (r.wrk && r.wrk.gateway.length > 0) {
    goals.push({ goal: `the same under wrk: >= ${STATE_GOALS.ratio.toFixed(1)}x`, measured: `${r.wrk.ratio}x`, met: r.wrk.ratio >= STATE_GOALS.ratio });
    const p99 = Math.max(...r.wrk.gateway.map((run) => run.p99));
    goals.push({ goal: `p99 <= ${STATE_GOALS.p99Ms} ms under wrk (worst round)`, measured: `${p99} ms${checkpointsOver(r.wrk.gateway, STATE_GOALS.p99Ms)}`, met: p99 <= STATE_GOALS.p99Ms });
    const wrkBad = r.wrk.gateway.reduce((n, run) => n + run.non2xx + run.errors + run.timeouts, 0);
    goals.push({ goal: 'zero non-2xx under wrk', measured: String(wrkBad), met: wrkBad === 0 });
  } else {
    goals.push({ goal: `the same under wrk`, measured: 'wrk not run', met: null });
  }
  goals.push(rssGoal(rss));
  return goals;
}

/**
 * Beside a p99 goal: in how many of the rounds over the limit, and of those within it, one of the
 * server's checkpoints ended (its sync phase fsyncs every file the checkpoint wrote, and commits
 * wait behind it). Nothing when the rounds were not watched for checkpoints or none is over.
 */
export function checkpointsOver(runs: readonly MeasuredRun[], limitMs: number): string {
  if (runs.some((r) => r.checkpoint === undefined)) return '';
  const over = runs.filter((r) => r.p99 > limitMs);
  if (over.length === 0) return '';
  const within = runs.filter((r) => r.p99 <= limitMs);
  const ended = (rs: readonly MeasuredRun[]) => rs.filter((r) => r.checkpoint !== null).length;
  return `; a checkpoint ended in ${ended(over)} of the ${over.length} rounds over it, ${ended(within)} of the ${within.length} within it`;
}

/** Database buffers per stored callback within 1.5x between a state's smallest and largest size. */
export function buffersFlatGoal(bySize: ReadonlyArray<{ size: string; buffersPerOk: number | null | undefined }>): Goal {
  const goal = `buffers per callback within ${STATE_GOALS.buffersFlat}x between the smallest and largest size`;
  const known = bySize.filter((s): s is { size: string; buffersPerOk: number } => typeof s.buffersPerOk === 'number');
  const shown = bySize.map((s) => `${s.size}: ${s.buffersPerOk ?? '-'}`).join(', ');
  if (known.length < 2) return { goal, measured: `${shown} (needs two sizes, e.g. --sizes=10k,1m)`, met: null };
  const first = known[0]!.buffersPerOk;
  const last = known.at(-1)!.buffersPerOk;
  return { goal, measured: shown, met: last <= STATE_GOALS.buffersFlat * first };
}

export function longPollGoals(f: LongPollFigures, rss: number | null): Goal[] {
  return [
    {
      goal: `every long-poll answered with its result within ${f.goalMs} ms of its callback's 2xx`,
      measured: `${f.withinGoal}/${f.count} within, ${f.answeredWithResult} with result, max ${fmt(f.delayMs.max)} ms`,
      met: f.withinGoal === f.count && f.answeredWithResult === f.count,
    },
    rssGoal(rss),
  ];
}

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => (r[c] ?? '').length)));
  return rows.map((r) => r.map((cell, c) => cell.padEnd(widths[c] ?? 0)).join('  ').trimEnd()).join('\n');
}

export interface ColdStart {
  /** Spawn to the first 200 of /readyz, in ms, each try. */
  postgres: number[];
  /** PGlite on an empty data directory (creates and migrates it). */
  pgliteFresh: number[];
  /** PGlite on a data directory that already exists. */
  pgliteExisting: number[];
}

export interface Noise {
  loadAverageAtStart: number[];
  loadAverageAtEnd: number[];
  /** /proc/pressure/cpu "some avg60" at start and end, %: how often something waited for a CPU. */
  cpuPressureAtStart: number | null;
  cpuPressureAtEnd: number | null;
}

const med = (values: number[]) => {
  const s = [...values].sort((a, b) => a - b);
  return s.length === 0 ? Number.NaN : s.length % 2 ? s[(s.length - 1) / 2]! : Math.round((s[s.length / 2 - 1]! + s[s.length / 2]!) / 2);
};

export function renderReport(ab: AbReport[], longPoll: LongPollReport | undefined, coldStart?: ColdStart, noise?: Noise): string {
  const rows: string[][] = [['scenario', 'target', 'req/s', 'p50 ms', 'p99 ms', 'non-2xx/err', 'ratio (median; rounds)', 'CPU ms/req', 'DB CPU ms/req', 'WAL B/req', 'buffers/req', 'peak RSS MB']];
  for (const r of ab) {
    for (const target of ['gateway', 'baseline'] as const) {
      const f = r[target];
      rows.push([
        `${r.scenario} (${r.connections} conn)`,
        target,
        String(f.rps),
        String(f.p50),
        String(f.p99),
        `${f.non2xx}/${f.errors + f.timeouts}`,
        target === 'gateway' ? `${r.medianRatio}x (${r.roundRatios.join(', ')})` : '1x',
        `${f.cpuMsPerOk ?? '-'}${target === 'gateway' && r.cpuRatio !== null ? ` (${r.cpuRatio}x)` : ''}`,
        String(f.dbCpuMsPerOk ?? '-'),
        f.walBytesPerOk === null ? '-' : String(Math.round(f.walBytesPerOk)),
        f.buffersPerOk === null || f.buffersPerOk === undefined ? '-' : String(f.buffersPerOk),
        String((target === 'gateway' ? r.gatewayPeakRssMb : r.baselinePeakRssMb) ?? '-'),
      ]);
    }
  }
  let out = ab.length > 0 ? table(rows) : '';
  for (const r of ab) for (const note of r.notes ?? []) out += `\n${r.scenario}: ${note}`;
  for (const r of ab) {
    if (!r.wrk) continue;
    const line = (t: 'gateway' | 'baseline') =>
      r.wrk![t]
        .map((f) => `${f.rps} req/s p50 ${f.p50} p99 ${f.p99}${f.non2xx + f.errors > 0 ? ` non-2xx ${f.non2xx + f.errors}` : ''} (${clockSpan(f)}${f.checkpoint ? ', a checkpoint ended' : ''})`)
        .join('; ');
    out += `\n\n${r.scenario} cross-check with wrk: ${r.wrk.ratio}x (rounds ${r.wrk.roundRatios.join(', ')}); gateway ${line('gateway')}; baseline ${line('baseline')}`;
  }
  if (longPoll) {
    const d = longPoll.delayMs;
    out +=
      `\n\nlong-poll: ${longPoll.count} opened (${longPoll.waitingAtStart ?? '?'} held by the gateway when callbacks began), callbacks at ${longPoll.callbackRate}/s; answer after callback 2xx: ` +
      `min ${fmt(d.min)} p50 ${fmt(d.p50)} p99 ${fmt(d.p99)} max ${fmt(d.max)} ms; ` +
      `with result ${longPoll.answeredWithResult}/${longPoll.count}, early ${longPoll.answeredBeforeCallback}, failed ${longPoll.failed}, ` +
      `callbacks failed ${longPoll.callbacksFailed}; peak RSS ${longPoll.gatewayPeakRssMb ?? '-'} MB`;
  }
  if (coldStart) {
    const show = (v: number[]) => (v.length === 0 ? '-' : `${med(v)} ms (${v.join(', ')})`);
    out +=
      `\n\ncold start to ready (spawn to first 200 of /readyz, median (tries)): PostgreSQL ${show(coldStart.postgres)}; ` +
      `PGlite, empty data dir ${show(coldStart.pgliteFresh)}; PGlite, existing data dir ${show(coldStart.pgliteExisting)}`;
  }
  if (noise) {
    out +=
      `\nmachine: load average ${noise.loadAverageAtStart.join(' ')} at start, ${noise.loadAverageAtEnd.join(' ')} at end; ` +
      `CPU pressure (some, avg60) ${noise.cpuPressureAtStart ?? '-'}% at start, ${noise.cpuPressureAtEnd ?? '-'}% at end`;
  }
  const goalRows: string[][] = [['scenario', 'goal', 'measured', '']];
  for (const r of [...ab, ...(longPoll ? [longPoll] : [])]) {
    for (const g of r.goals) goalRows.push([r.scenario, g.goal, g.measured, verdict(g)]);
  }
  return `${out}\n\nGoals\n${table(goalRows)}\n`;
}

/** A run's wall-clock span as hh:mm:ss-hh:mm:ss UTC (older results have none: "?"). */
export function clockSpan(f: { startedAt?: string; endedAt?: string }): string {
  const hms = (iso: string | undefined) => (iso ? iso.slice(11, 19) : '?');
  return `${hms(f.startedAt)}-${hms(f.endedAt)}`;
}
