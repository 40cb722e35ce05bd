import { execFile } from 'node:child_process';
import t from 'tap';
import { ROOT } from './helpers/root.js';


/**
 * The notice script's stderr. Run asynchronously and bounded: spawnSync blocked this file's event
 * loop, so a child stalled on a loaded machine left nothing but the runner's 120 s file timeout.
 */
function notice(env: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['scripts/test-notice.mjs'], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...env }, encoding: 'utf8', timeout: 60_000 }, (err, _stdout, stderr) =>
      err ? reject(new Error(`scripts/test-notice.mjs failed (${err.signal ?? err.code}): ${stderr}`)) : resolve(stderr),
    );
  });
}

t.test('npm test without DATABASE_URL says in one line which tests it leaves out and why', async (t) => {
  const [line, quiet] = await Promise.all([notice({}), notice({ DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/postgres' })]);
  t.match(line, /^npm test: DATABASE_URL is not set, so the tests that need a real PostgreSQL server .* are left out\. Set DATABASE_URL=/);
  t.equal(line.trimEnd().split('\n').length, 1, 'one line');
  t.equal(quiet, '', 'nothing to say with DATABASE_URL');
});
