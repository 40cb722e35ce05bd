import type { AbResult } from './compare.js';
import type { LongPollFigures } from '../scenarios/long-poll.js';

// The goals beside the figures: a goal missed is printed as MISSED, never hidden.

export interface Goal {
  goal: string;
  measured: string;
  met: boolean;
}

export interface AbReport extends AbResult {
  scenario: string;
  connections: number;
  gatewayPeakRssMb: number | null;
  baselinePeakRssMb: number | null;
  goals: Goal[];
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

export function abGoals(scenario: string, r: AbResult, rss: number | null): Goal[] {
  const ratio: Goal = (() => {
    const min = scenario === 'callback' ? 1.0 : 0.9;
    return { goal: `throughput >= ${min.toFixed(1)}x baseline`, measured: `${r.ratio}x`, met: r.ratio >= min };
  })();
  const goals = [ratio];
  if (scenario === 'callback') {
    goals.push({ goal: 'p99 <= 30 ms', measured: `${r.gateway.p99} ms`, met: r.gateway.p99 <= 30 });
    const bad = r.gateway.non2xx + r.gateway.errors + r.gateway.timeouts;
    goals.push({ goal: 'zero non-2xx', measured: String(bad), met: bad === 0 });
  }
  goals.push(rssGoal(rss));
  return goals;
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

export function renderReport(ab: AbReport[], longPoll: LongPollReport | undefined): string {
  const rows: string[][] = [['scenario', 'target', 'req/s', 'p50 ms', 'p99 ms', 'non-2xx/err', 'ratio', 'CPU ms/req', 'DB CPU ms/req', 'peak RSS MB']];
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
        target === 'gateway' ? `${r.ratio}x (rounds ${r.roundRatios.join(', ')})` : '1x',
        `${f.cpuMsPerOk ?? '-'}${target === 'gateway' && r.cpuRatio !== null ? ` (${r.cpuRatio}x)` : ''}`,
        String(f.dbCpuMsPerOk ?? '-'),
        String((target === 'gateway' ? r.gatewayPeakRssMb : r.baselinePeakRssMb) ?? '-'),
      ]);
    }
  }
  let out = ab.length > 0 ? table(rows) : '';
  if (longPoll) {
    const d = longPoll.delayMs;
    out +=
      `\n\nlong-poll: ${longPoll.count} opened (${longPoll.waitingAtStart ?? '?'} held by the gateway when callbacks began), callbacks at ${longPoll.callbackRate}/s; answer after callback 2xx: ` +
      `min ${fmt(d.min)} p50 ${fmt(d.p50)} p99 ${fmt(d.p99)} max ${fmt(d.max)} ms; ` +
      `with result ${longPoll.answeredWithResult}/${longPoll.count}, early ${longPoll.answeredBeforeCallback}, failed ${longPoll.failed}, ` +
      `callbacks failed ${longPoll.callbacksFailed}; peak RSS ${longPoll.gatewayPeakRssMb ?? '-'} MB`;
  }
  const goalRows: string[][] = [['scenario', 'goal', 'measured', '']];
  for (const r of [...ab, ...(longPoll ? [longPoll] : [])]) {
    for (const g of r.goals) goalRows.push([r.scenario, g.goal, g.measured, g.met ? 'met' : 'MISSED']);
  }
  return `${out}\n\nGoals\n${table(goalRows)}\n`;
}
