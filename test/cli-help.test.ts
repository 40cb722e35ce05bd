import t from 'tap';
import { ENTRY_POINTS, failingEnvironment } from './helpers/entry-points.js';
import { startProcess } from './helpers/process.js';

// Every entry point answers --help (here) and --version (cli.test.ts), doing nothing else: see
// failingEnvironment.

t.test('--help prints the usage and exits 0, on every entry point', async (t) => {
  const env = await failingEnvironment();
  for (const entry of ENTRY_POINTS) {
    const proc = startProcess(t, env, entry, ['--help']);
    t.equal((await proc.exited).code, 0, entry);
    t.match(proc.stdout[0], /^usage: /, `${entry}: usage`);
    t.ok(proc.stdout.some((l) => l.includes('docs/configuration.md')), `${entry}: where the settings are described`);
    t.same(proc.stderr, [], `${entry}: nothing else ran`);
  }
});
