import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import type { Test } from 'tap';
import { ROOT } from './root.js';

/** Where `npm test` compiled a TypeScript file of the repository (scripts/build-tests.mjs). */
export const compiledEntry = (entry: string) => path.join(ROOT, '.tap-build', entry.replace(/\.ts$/, '.js'));

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
 * Runs an entry point of the repository (default: the gateway's src/server.ts), as `npm test` compiled
 * it, as a real child process with no module loader, exactly the given environment plus PATH, and
 * the given arguments. Killed at teardown if still running.
 */
export function startProcess(t: Test, env: Record<string, string>, entry = 'src/server.ts', args: string[] = []): ServerProcess {
  const child = spawn(process.execPath, [compiledEntry(entry), ...args], {
    cwd: ROOT,
    // No coverage from the child: the report measures the test processes (docs/testing.md).
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
