import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import t from 'tap';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

function notice(env: Record<string, string>): string {
  const run = spawnSync(process.execPath, ['scripts/test-notice.mjs'], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...env }, encoding: 'utf8' });
  return run.stderr;
}

t.test('npm test without DATABASE_URL says in one line which tests it leaves out and why', async (t) => {
  const line = notice({});
  t.match(line, /^npm test: DATABASE_URL is not set, so the tests that need a real PostgreSQL server .* are left out\. Set DATABASE_URL=/);
  t.equal(line.trimEnd().split('\n').length, 1, 'one line');
  t.equal(notice({ DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/postgres' }), '', 'nothing to say with DATABASE_URL');
});
