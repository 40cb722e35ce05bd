import { once } from 'node:events';
import net from 'node:net';
import t from 'tap';
import { TEST_CPF_HASH_KEY, TEST_PARTNER_TOKEN } from './helpers/app.js';
import { freshDatabaseUrl, SERVER_URL } from './helpers/database.js';
import { startProcess } from './helpers/process.js';

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const parse = (lines: string[]) => lines.map((l) => JSON.parse(l) as Record<string, unknown>);

t.test('in production a bad configuration is one JSON line per bad variable, naming it, never its value', async (t) => {
  const gateway = startProcess(t, { NODE_ENV: 'production', PORT: 'eighty', PARTNER_TOKEN: 'leaky-token-value' });
  t.equal((await gateway.exited).code, 1);
  const lines = parse(gateway.stderr);
  // The malformed ones, then the required ones missing beside them: all in the one refused start.
  t.same(lines.map((l) => l.variable), ['PORT', 'PARTNER_TOKEN', 'DATABASE_URL', 'PROVIDER_BASE_URL', 'CPF_HASH_KEY', 'CALLBACK_ALLOWED_IPS']);
  for (const line of lines) {
    t.match(line, { level: 'fatal', time: ISO, msg: new RegExp(`^${String(line.variable)}: `) });
  }
  t.notMatch(gateway.stderr.join('\n'), 'leaky-token-value');
});

t.test('in production a database that cannot be used is a JSON fatal line', async (t) => {
  const closed = net.createServer().listen(0, '127.0.0.1');
  await once(closed, 'listening');
  const port = (closed.address() as net.AddressInfo).port;
  await new Promise((resolve) => closed.close(resolve));
  const gateway = startProcess(t, {
    NODE_ENV: 'production',
    DATABASE_URL: `postgres://postgres@127.0.0.1:${port}/x`,
    PROVIDER_BASE_URL: 'http://127.0.0.1:9',
    PARTNER_TOKEN: TEST_PARTNER_TOKEN,
    CPF_HASH_KEY: TEST_CPF_HASH_KEY,
    CALLBACK_ALLOWED_IPS: '127.0.0.1/32',
    HOST: '127.0.0.1',
    PORT: '0',
  });
  t.equal((await gateway.exited).code, 1);
  const [line, ...others] = parse(gateway.stderr);
  t.same(others, []);
  t.match(line, { level: 'fatal', time: ISO, msg: /^underwriting-gateway failed to start: cannot use the database at DATABASE_URL: / });
});

t.test('LOG_FORMAT=json makes them JSON outside production too, naming the variable behind a failed start', async (t) => {
  const gateway = startProcess(t, { LOG_FORMAT: 'json', HOST: '127.0.0.1', PORT: '0', SANDBOX_PORT: '0', DATA_DIR: '/proc/nope' });
  t.equal((await gateway.exited).code, 1);
  const [line, ...others] = parse(gateway.stderr);
  t.same(others, []);
  t.match(line, { level: 'fatal', time: ISO, variable: 'DATA_DIR', msg: /^underwriting-gateway failed to start: DATA_DIR: / });
});

t.test('outside production the fatal lines stay readable text', async (t) => {
  const gateway = startProcess(t, { PORT: 'eighty' });
  t.equal((await gateway.exited).code, 1);
  t.same(gateway.stderr, ['PORT: must be a whole number from 0 to 65535']);
});

t.test('npm run migrate in production needs the database only, none of the other secrets', async (t) => {
  const refused = startProcess(t, { NODE_ENV: 'production' }, 'src/db/migrate-cli.ts');
  t.equal((await refused.exited).code, 1);
  t.same(parse(refused.stderr).map((l) => l.msg), ['DATABASE_URL: required when NODE_ENV=production'], 'only the database is asked for');

  if (!SERVER_URL) return; // applying migrations in production needs a real PostgreSQL
  const migrate = startProcess(t, { NODE_ENV: 'production', DATABASE_URL: await freshDatabaseUrl(t) }, 'src/db/migrate-cli.ts');
  t.equal((await migrate.exited).code, 0, migrate.stderr.join('\n'));
  t.ok(parse(migrate.stdout).some((l) => l.msg === 'migrations applied'));
});
