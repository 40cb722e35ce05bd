import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { statSync, utimesSync } from 'node:fs';
import t from 'tap';
import { ROOT } from './helpers/root.js';

const STAMP = `${ROOT}dist/.build-stamp`;

async function build(mode: string): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, ['scripts/build.mjs', mode], { cwd: ROOT, stdio: ['ignore', 'inherit', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, stderr };
}

t.test('npm start compiles only when a source is newer than the last build', async (t) => {
  t.equal((await build('--if-stale')).code, 0, 'built (or already up to date)');

  const again = await build('--if-stale');
  t.equal(again.code, 0);
  t.equal(again.stderr, '', 'nothing newer than the build: no compilation');
  t.equal((await build('--check')).code, 0, 'up to date');

  // A build older than the sources (as after an edit or a git pull) is stale: the next start compiles.
  const built = statSync(STAMP);
  t.teardown(() => utimesSync(STAMP, built.atime, built.mtime));
  const past = new Date(Date.now() - 3600_000);
  utimesSync(STAMP, past, past);
  t.equal((await build('--check')).code, 1, 'stale');
});
