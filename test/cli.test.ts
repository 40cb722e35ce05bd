import { copyFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import t from 'tap';
import { packageVersion, readCommandLine } from '../src/config/cli.js';
import { ENTRY_POINTS, failingEnvironment } from './helpers/entry-points.js';
import { compiledEntry, startProcess } from './helpers/process.js';

// Every entry point answers --version (here), --help (cli-help.test.ts) and refuses unknown options,
// doing nothing else: see failingEnvironment.

t.test('--version prints the package version and exits 0, on every entry point', async (t) => {
  const env = await failingEnvironment();
  t.match(packageVersion(), /^underwriting-gateway \d+\.\d+\.\d+/);
  for (const entry of ENTRY_POINTS) {
    const proc = startProcess(t, env, entry, ['--version']);
    t.equal((await proc.exited).code, 0, entry);
    t.same(proc.stdout, [packageVersion()], `${entry}: the version alone`);
    t.same(proc.stderr, [], `${entry}: nothing else ran`);
  }
});

t.test('--version finds package.json from where the build puts cli.js (dist/src/config/), as npm start and the image run it', async (t) => {
  // A copy of the module laid out as the build lays it out, under a package.json of its own.
  const root = t.testdir({ 'package.json': JSON.stringify({ name: 'underwriting-gateway', version: '9.8.7', type: 'module' }), dist: { src: { config: {} } } });
  copyFileSync(compiledEntry('src/config/cli.ts'), path.join(root, 'dist/src/config/cli.js'));
  const built = (await import(pathToFileURL(path.join(root, 'dist/src/config/cli.js')).href)) as typeof import('../src/config/cli.js');
  t.equal(built.packageVersion(), 'underwriting-gateway 9.8.7');
});

t.test('an unknown option exits 2 with the usage on stderr, before anything runs', async (t) => {
  for (const entry of ['src/server.ts', 'src/db/migrate-cli.ts', 'bench/run.ts']) {
    const proc = startProcess(t, { PORT: 'eighty' }, entry, ['--bogus']);
    t.equal((await proc.exited).code, 2, entry);
    t.match(proc.stderr[0], /unknown option --bogus$/, entry);
    t.ok(proc.stderr.some((l) => l.startsWith('usage: ')), `${entry}: usage`);
    t.same(proc.stdout, [], `${entry}: nothing on stdout`);
  }
});

t.test("the bench's own options are accepted, others not", async (t) => {
  const bench = { command: 'bench', summary: 's', accepts: (a: string) => a === '--quick' };
  t.same(readCommandLine(bench, ['--quick']), { run: true, args: ['--quick'] });
  t.match(readCommandLine(bench, ['--quick', '--slow']), { run: false, exitCode: 2, out: 'stderr' });
  t.match(readCommandLine(bench, ['--quick', '-h']), { run: false, exitCode: 0, out: 'stdout', text: /^usage: bench/ });
});
