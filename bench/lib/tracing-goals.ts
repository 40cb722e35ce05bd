import type { AbResult } from './compare.js';
import type { Goal } from './report.js';

// Issue 35: tracing off must cost nothing measurable; on (exporting every span), within 10%.

/** What a --tracing A/B must show: the gateway (on, or this build off) against its reference. */
export function tracingGoals(mode: 'on' | 'off' | 'aa', r: AbResult): Goal[] {
  const [minRatio, maxCpu] = mode === 'on' ? [0.9, 1.1] : [0.95, 1.05];
  const what = mode === 'on' ? 'tracing on vs off' : mode === 'off' ? 'tracing off vs the build before tracing' : 'A/A, both off';
  return [
    { goal: `${what}: throughput >= ${minRatio}x (median of rounds)`, measured: `${r.medianRatio}x`, met: r.medianRatio >= minRatio },
    { goal: `${what}: gateway CPU per answer <= ${maxCpu}x`, measured: r.cpuRatio === null ? 'n/a' : `${r.cpuRatio}x`, met: r.cpuRatio !== null && r.cpuRatio <= maxCpu },
  ];
}
