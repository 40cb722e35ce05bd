import { execFile } from 'node:child_process';
import t from 'tap';
import { ROOT, rootUrl } from './helpers/root.js';

const { withCoverageDefault } = (await import(rootUrl('scripts/test-coverage.mjs').href)) as {
  withCoverageDefault: (args: string[], env: Record<string, string | undefined>) => string[];
};


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
  t.match(line, /coverage is measured there \(here only with --no-disable-coverage/);
  t.equal(line.trimEnd().split('\n').length, 1, 'one line');
  t.equal(quiet, '', 'nothing to say with DATABASE_URL');
});

t.test('npm test measures coverage on PostgreSQL, not on PGlite, unless an argument asks about it', async (t) => {
  const pg = { DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/postgres' };
  t.same(withCoverageDefault([], {}), ['--disable-coverage'], 'PGlite: off');
  t.same(withCoverageDefault(['.tap-build/test/x.test.js'], {}), ['--disable-coverage', '.tap-build/test/x.test.js']);
  t.same(withCoverageDefault(['--jobs=4'], pg), ['--jobs=4'], 'PostgreSQL: as tap measures it (.taprc)');
  t.same(withCoverageDefault(['--jobs=4'], { DATABASE_URL: '' }), ['--disable-coverage', '--jobs=4'], 'an empty DATABASE_URL is PGlite');
  for (const asks of ['--no-disable-coverage', '--disable-coverage', '--coverage-report=html', '--coverage-report', '--allow-incomplete-coverage', '--show-full-coverage']) {
    t.same(withCoverageDefault([asks, 'x'], {}), [asks, 'x'], `${asks}: left as given`);
  }
  t.same(withCoverageDefault(['--disable-coverage-x'], {}), ['--disable-coverage', '--disable-coverage-x'], 'only whole option names count');
  t.same(withCoverageDefault(['-d', 'out'], {}), ['--disable-coverage', '-d', 'out'], "-d is tap's --output-dir, not about coverage");
});
