import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

// Every process the benchmark starts is a child registered here, and every one is stopped at the
// end: normally, on error, on SIGINT/SIGTERM, and (SIGKILL) when the harness itself exits.

export interface Child {
  name: string;
  pid: number;
  baseUrl: string;
  /** The last lines the child wrote to stderr/stdout, for error reports. */
  output(): string;
  exited: Promise<number | null>;
  /** Spawn to the first 2xx of readyPath, in ms. */
  readyMs: number;
  stop(): Promise<void>;
  /** kill -9: no shutdown at all (a crash). */
  kill(): Promise<void>;
}

export { GATEWAY_NODE_ARGS } from '../../src/config/node-flags.js';

const running = new Set<ChildProcess>();

process.on('exit', () => {
  for (const proc of running) proc.kill('SIGKILL');
});

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

export interface StartOptions {
  name: string;
  script: string;
  env: Record<string, string>;
  nodeArgs?: readonly string[];
  /** Path answered with 2xx once the child is ready. */
  readyPath: string;
  readyTimeoutMs?: number;
  /** How often readiness is polled (default 100 ms; cold-start measurements poll faster). */
  readyPollMs?: number;
  /** Another Node than this one's (e.g. the image's Node 24). */
  node?: string;
  /** A command the child runs under (e.g. valgrind and its options); the child's pid is then the launcher's. */
  launcher?: readonly string[];
  /** The port to listen on (default: a free one), and the variable that names it (default PORT; the sandbox reads SANDBOX_PORT). */
  port?: number;
  portVariable?: string;
}

/** A child that could not bind its port: another process took it between freePort() and the child's listen. */
const PORT_TAKEN = /already in use|EADDRINUSE/;

/**
 * Starts a child and waits until it answers readyPath. On a port picked here (freePort), a child
 * that exits at start because another process took that port meanwhile (parallel test files, CI)
 * is started again on another, up to 3 times.
 */
export async function startChild(options: StartOptions): Promise<Child> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startChildOnce(options, options.port ?? (await freePort()));
    } catch (err) {
      if (options.port !== undefined || attempt >= 3 || !(err instanceof ExitedDuringStart) || !PORT_TAKEN.test(err.output)) throw err;
    }
  }
}

class ExitedDuringStart extends Error {
  constructor(
    name: string,
    readonly output: string,
  ) {
    super(`${name} exited during start:\n${output}`);
  }
}

async function startChildOnce(options: StartOptions, port: number): Promise<Child> {
  const spawnedAt = performance.now();
  const nodeCommand = [options.node ?? process.execPath, ...(options.nodeArgs ?? []), options.script];
  const [command, ...commandArgs] = [...(options.launcher ?? []), ...nodeCommand] as [string, ...string[]];
  const proc = spawn(command, commandArgs, {
    // ENV_FILE empty: a developer's .env never changes what is measured.
    env: { PATH: process.env.PATH ?? '', ENV_FILE: '', ...options.env, [options.portVariable ?? 'PORT']: String(port), HOST: '127.0.0.1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(proc);
  let tail = '';
  const keep = (chunk: Buffer) => {
    tail = (tail + chunk.toString('utf8')).slice(-4000);
  };
  proc.stdout?.on('data', keep);
  proc.stderr?.on('data', keep);
  const exited = new Promise<number | null>((resolve) => {
    proc.once('exit', (code) => {
      running.delete(proc);
      resolve(code);
    });
  });
  let gone = false;
  void exited.then(() => (gone = true));

  const child: Child = {
    name: options.name,
    pid: proc.pid ?? -1,
    baseUrl: `http://127.0.0.1:${port}`,
    output: () => tail,
    exited,
    readyMs: Number.NaN,
    kill: () => {
      if (!gone) proc.kill('SIGKILL');
      return exited.then(() => undefined);
    },
    stop: async () => {
      if (gone) return;
      proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };

  const deadline = Date.now() + (options.readyTimeoutMs ?? 30_000);
  while (Date.now() < deadline) {
    if (gone) throw new ExitedDuringStart(options.name, tail);
    try {
      const res = await fetch(`${child.baseUrl}${options.readyPath}`, { signal: AbortSignal.timeout(1_000) });
      await res.arrayBuffer();
      if (res.ok) {
        child.readyMs = Math.round(performance.now() - spawnedAt);
        return child;
      }
    } catch {
      // not listening yet
    }
    await sleep(options.readyPollMs ?? 100);
  }
  await child.stop();
  throw new Error(`${options.name} was not ready within ${options.readyTimeoutMs ?? 30_000} ms:\n${tail}`);
}

export async function stopAll(): Promise<void> {
  await Promise.all(
    [...running].map(
      (proc) =>
        new Promise<void>((resolve) => {
          const timer = setTimeout(() => proc.kill('SIGKILL'), 5_000);
          proc.once('exit', () => {
            clearTimeout(timer);
            resolve();
          });
          proc.kill('SIGTERM');
        }),
    ),
  );
}

/** Peak resident memory of a child in MB: the kernel's high-water mark, else the highest sample seen. */
export class RssSampler {
  private peakKb = 0;
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly pid: number, intervalMs = 100) {
    this.timer = setInterval(() => this.sample(), intervalMs);
    this.timer.unref();
  }

  private read(field: 'VmRSS' | 'VmHWM'): number {
    try {
      const status = readFileSync(`/proc/${this.pid}/status`, 'utf8');
      const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status);
      return match ? Number(match[1]) : 0;
    } catch {
      return 0;
    }
  }

  sample(): void {
    this.peakKb = Math.max(this.peakKb, this.read('VmRSS'), this.read('VmHWM'));
  }

  /** Stops sampling; returns the peak in MB (null where /proc is not available). */
  finish(): number | null {
    this.sample();
    clearInterval(this.timer);
    return this.peakKb > 0 ? Math.round((this.peakKb / 1024) * 10) / 10 : null;
  }
}

/** CPU time (user + system) a process has used so far, in ms; null where /proc is not available. */
export function cpuTimeMs(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name, which is in parentheses and may contain spaces.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    return Number.isFinite(ticks) ? ticks * (1000 / CLOCK_TICKS_PER_S) : null;
  } catch {
    return null;
  }
}

/** Time a process's threads spent on a CPU and runnable but waiting for one, in ms. */
export interface SchedTimes {
  runMs: number;
  waitMs: number;
}

/**
 * A process's scheduler times so far, summed over its threads (`/proc/<pid>/task/<tid>/schedstat`:
 * nanoseconds on a CPU, then nanoseconds on a run queue); null where /proc does not say. The wait
 * is what two shared cores cost a process that `/proc/<pid>/stat` does not show: time it was ready
 * to run and did not. Only threads alive now count: one that ended took its times with it.
 */
export function schedTimesMs(pid: number): SchedTimes | null {
  try {
    let runNs = 0;
    let waitNs = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        const [run, wait] = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ').map(Number);
        runNs += run ?? 0;
        waitNs += wait ?? 0;
      } catch {
        // A thread that ended meanwhile.
      }
    }
    return Number.isFinite(runNs + waitNs) ? { runMs: runNs / 1e6, waitMs: waitNs / 1e6 } : null;
  } catch {
    return null;
  }
}

/** Several processes' scheduler times, by pid (one that is gone, or unknown, is left out). */
export function schedTimesOf(pids: Iterable<number>): Map<number, SchedTimes> {
  const times = new Map<number, SchedTimes>();
  for (const pid of pids) {
    const t = schedTimesMs(pid);
    if (t !== null) times.set(pid, t);
  }
  return times;
}

/**
 * What the processes of `after` spent since `before`, per second of `seconds`; a process started
 * meanwhile counts whole, as backendCpuBetween does.
 */
export function schedPerSecond(before: Map<number, SchedTimes> | null, after: Map<number, SchedTimes> | null, seconds: number): SchedTimes | null {
  if (before === null || after === null || after.size === 0 || seconds <= 0) return null;
  let runMs = 0;
  let waitMs = 0;
  for (const [pid, t] of after) {
    runMs += t.runMs - (before.get(pid)?.runMs ?? 0);
    waitMs += t.waitMs - (before.get(pid)?.waitMs ?? 0);
  }
  return { runMs: Math.round(runMs / seconds), waitMs: Math.round(waitMs / seconds) };
}

/** USER_HZ: 100 on every Linux the benchmark is meant for. */
const CLOCK_TICKS_PER_S = 100;
