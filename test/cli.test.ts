import { once } from 'node:events';
import net from 'node:net';
import t from 'tap';
import { packageVersion, readCommandLine } from '../src/cli.js';
import { startProcess } from './helpers/process.js';

// Every entry point answers --help and --version and does nothing else: each is started with a
// configuration that would make it fail (a bad PORT, a database nobody listens on), so exit 0
// shows that nothing but the answer ran.

const ENTRIES = ['src/server.ts', 'src/db/migrate-cli.ts', 'src/sandbox/server.ts', 'src/provider/token-cli.ts', 'src/console/build-cli.ts', 'bench/run.ts'];

async function closedPort(): Promise<number> {
  const server = net.createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

t.test('--version prints the package version and exits 0, on every entry point', async (t) => {
  const env = { PORT: 'eighty', SANDBOX_PORT: 'eighty', DATABASE_URL: `postgres://postgres@127.0.0.1:${await closedPort()}/x` };
  t.match(packageVersion(), /^underwriting-gateway \d+\.\d+\.\d+/);
  for (const entry of ENTRIES) {
    const proc = startProcess(t, env, entry, ['--version']);
    t.equal((await proc.exited).code, 0, entry);
    t.same(proc.stdout, [packageVersion()], `${entry}: the version alone`);
    t.same(proc.stderr, [], `${entry}: nothing else ran`);
  }
});

t.test('--help prints the usage and exits 0, on every entry point', async (t) => {
  const env = { PORT: 'eighty', SANDBOX_PORT: 'eighty', DATABASE_URL: `postgres://postgres@127.0.0.1:${await closedPort()}/x` };
  for (const entry of ENTRIES) {
    const proc = startProcess(t, env, entry, ['--help']);
    t.equal((await proc.exited).code, 0, entry);
    t.match(proc.stdout[0], /^usage: /, `${entry}: usage`);
    t.ok(proc.stdout.some((l) => l.includes('docs/configuration.md')), `${entry}: where the settings are described`);
    t.same(proc.stderr, [], `${entry}: nothing else ran`);
  }
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
