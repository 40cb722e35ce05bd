import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { RunFigures } from './load.js';

// The second, independent load generator: wrk (C, its own event loop and clock, far less CPU
// per request than autocannon in the harness's Node process), driven by a Lua script that makes
// every request distinct. Its figures cross-check autocannon's.

export interface WrkSpec {
  /** The Lua script (bench/wrk/*.lua) and its environment. */
  script: string;
  env: Record<string, string>;
  path: string;
}

const execFileP = promisify(execFile);
export const WRK_THREADS = 2;

export function wrkAvailable(): Promise<boolean> {
  return execFileP('wrk', ['--version']).then(
    () => true,
    (err: { stdout?: string }) => typeof err.stdout === 'string' && err.stdout.includes('wrk'),
  );
}

export async function runWrk(baseUrl: string, connections: number, durationS: number, spec: WrkSpec): Promise<RunFigures> {
  const startedAt = new Date().toISOString();
  const { stdout } = await execFileP(
    'wrk',
    [`-t${WRK_THREADS}`, `-c${connections}`, `-d${Math.max(1, Math.round(durationS))}s`, '--timeout', '30s', '-s', spec.script, `${baseUrl}${spec.path}`],
    { env: { ...process.env, ...spec.env, WRK_THREADS: String(WRK_THREADS) }, maxBuffer: 1 << 20 },
  );
  const line = stdout.split('\n').find((l) => l.startsWith('WRK_JSON '));
  if (!line) throw new Error(`wrk printed no summary:\n${stdout}`);
  const w = JSON.parse(line.slice('WRK_JSON '.length)) as { durationS: number; requests: number; non2xx: number; errors: number; p50: number; p99: number; max: number };
  const ok = w.requests - w.non2xx;
  const rps = w.durationS > 0 ? Math.round((ok / w.durationS) * 10) / 10 : 0;
  return {
    durationS: w.durationS,
    requests: w.requests,
    ok,
    rps,
    autocannonRps: Number.NaN,
    autocannonDurationS: Number.NaN,
    p50: w.p50,
    p99: w.p99,
    max: w.max,
    non2xx: w.non2xx,
    errors: w.errors,
    timeouts: 0,
    statusCodes: {},
    exhausted: false,
    secondP99: [],
    startedAt,
    endedAt: new Date().toISOString(),
  };
}
