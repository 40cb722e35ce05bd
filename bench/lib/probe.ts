import { readFileSync, statSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ProbeFigures } from '../probe.js';

export type { ProbeFigures };

const fileSize = (path: string) => {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
};

/**
 * Asks a gateway started with bench/probe.js what it saw since it was last asked (SIGUSR2), and
 * reads the line it appends to `path`; null when it does not answer within two seconds.
 */
export function probeReader(pid: number, path: string): () => Promise<ProbeFigures | null> {
  return async () => {
    const before = fileSize(path);
    process.kill(pid, 'SIGUSR2');
    for (const deadline = Date.now() + 2_000; Date.now() < deadline; await sleep(5)) {
      if (fileSize(path) > before) {
        const text = readFileSync(path, 'utf8');
        if (!text.endsWith('\n')) continue;
        return JSON.parse(text.trimEnd().split('\n').at(-1)!) as ProbeFigures;
      }
    }
    return null;
  };
}

/** "inside p99 21.3 ms (max 40.2), gc 512 ms in 230 pauses (max 9.8, 2 major: 15.2 ms), loop delay p99 6 max 12 ms, 1520 batch statements p50 4.1 p99 12.3 max 20 ms" */
export function describeProbe(p: ProbeFigures): string {
  return (
    `inside p99 ${p.insideP99} ms (max ${p.insideMax}), gc ${p.gcMs} ms in ${p.gcPauses} pauses (max ${p.gcMaxMs}` +
    `${p.majorGcs > 0 ? `, ${p.majorGcs} major: ${p.majorGcMs} ms` : ''}), loop delay p99 ${p.loopP99} max ${p.loopMax} ms` +
    (p.batches > 0 ? `, ${p.batches} batch statements p50 ${p.batchP50} p99 ${p.batchP99} max ${p.batchMax} ms` : '') +
    `, ${p.connects} database connections opened` +
    (p.checkouts > 0 ? `, ${p.checkouts} pool checkouts (${p.checkoutsWaited} waited >= 1 ms; p99 ${p.checkoutP99} max ${p.checkoutMax} ms)` : '') +
    (p.statements && Object.keys(p.statements).length > 0
      ? `\n      statements: ${Object.entries(p.statements)
          .sort((a, b) => b[1].totalMs - a[1].totalMs)
          .map(([n, s]) => `${n} ${s.calls}x ${s.totalMs} ms (max ${s.maxMs})`)
          .join(', ')}`
      : '') +
    (p.secondInsideP99.length > 0 ? `\n      inside p99 by second: ${p.secondInsideP99.join(', ')} ms` : '') +
    (p.secondBatchMax.length > 0 ? `\n      batch statement max by second: ${p.secondBatchMax.join(', ')} ms` : '')
  );
}
