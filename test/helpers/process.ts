import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import type { Test } from 'tap';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface ServerProcess {
  child: ChildProcess;
  /** Every stdout line (pino JSON) and stderr line so far. */
  stdout: string[];
  stderr: string[];
  /** Resolves with the first parsed log entry that satisfies the predicate. */
  waitForLog(predicate: (entry: Record<string, any>) => boolean): Promise<Record<string, any>>;
  /** Resolves once it listens, with its base URL. */
  listening(): Promise<string>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Runs a TypeScript entry point (default: the gateway's server.ts) as a real child process, with
 * exactly the given environment plus PATH, and the given arguments. Killed at teardown if still running.
 */
export function startProcess(t: Test, env: Record<string, string>, entry = 'src/server.ts', args: string[] = []): ServerProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', entry, ...args], {
    cwd: ROOT,
    // No coverage from the child: its TypeScript is compiled by tsx, not by tap's loader, and the
    // two sets of offsets and source maps for one file broke tap's merged report (every file
    // counted as one covered statement, depending on which process's data came first).
    // ENV_FILE empty: no .env of the developer's reaches the child (a test that wants one sets it).
    env: { PATH: process.env.PATH ?? '', _TAPJS_PROCESSINFO_COVERAGE_: '0', ENV_FILE: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const stdout: string[] = [];
  const stderr: string[] = [];
  const waiters: Array<{ predicate: (e: Record<string, any>) => boolean; resolve: (e: Record<string, any>) => void }> = [];
  let buffered = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    buffered += chunk;
    let nl;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      stdout.push(line);
      let entry: Record<string, any>;
      try {
        entry = JSON.parse(line) as Record<string, any>;
      } catch {
        continue;
      }
      for (const w of [...waiters]) {
        if (w.predicate(entry)) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(entry);
        }
      }
    }
  });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => stderr.push(...chunk.split('\n').filter(Boolean)));
  const exited = once(child, 'exit').then(([code, signal]) => ({
    code: code as number | null,
    signal: signal as NodeJS.Signals | null,
  }));
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
  });
  const waitForLog = (predicate: (entry: Record<string, any>) => boolean) =>
    new Promise<Record<string, any>>((resolve, reject) => {
      for (const line of stdout) {
        try {
          const entry = JSON.parse(line) as Record<string, any>;
          if (predicate(entry)) return resolve(entry);
        } catch {
          /* not JSON */
        }
      }
      waiters.push({ predicate, resolve });
      void exited.then(({ code, signal }) =>
        reject(new Error(`process exited (${code ?? signal}) first; stderr: ${stderr.join('\n')}`)),
      );
    });
  return {
    child,
    stdout,
    stderr,
    waitForLog,
    listening: async () => {
      const entry = await waitForLog((e) => typeof e.msg === 'string' && e.msg.startsWith('Server listening at'));
      return (entry.msg as string).replace('Server listening at ', '');
    },
    exited,
  };
}
