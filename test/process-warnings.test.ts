import { once } from 'node:events';
import net from 'node:net';
import t from 'tap';
import { TEST_CPF_HASH_KEY, TEST_PARTNER_TOKEN } from './helpers/app.js';
import { startProcess } from './helpers/process.js';

// Node prints a process warning (a dependency's deprecation or security notice) as several lines
// of free text on stderr: "(node:1) Warning: SECURITY WARNING: ...". node-postgres emits one for
// every DATABASE_URL with sslmode=require (the usual setting for a managed PostgreSQL). A log
// collector reading the container's output as JSON lines (docs/operations.md: "Logs are JSON")
// then gets unparseable records. In JSON format, such a warning is one warn line of the log.

async function closedPort(): Promise<number> {
  const closed = net.createServer().listen(0, '127.0.0.1');
  await once(closed, 'listening');
  const port = (closed.address() as net.AddressInfo).port;
  await new Promise((resolve) => closed.close(resolve));
  return port;
}

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

function jsonLines(lines: string[]): Array<Record<string, unknown>> {
  return lines.map((line) => {
    try {
      return JSON.parse(line) as Record<string, unknown>;
    } catch {
      return { notJson: line };
    }
  });
}

t.test('in production a process warning (pg on sslmode=require) is a JSON warn line, not free text on stderr', async (t) => {
  const port = await closedPort();
  const gateway = startProcess(t, {
    NODE_ENV: 'production',
    DATABASE_URL: `postgres://postgres:pw-in-the-url@127.0.0.1:${port}/x?sslmode=require`,
    PROVIDER_BASE_URL: 'http://127.0.0.1:9',
    PARTNER_TOKEN: TEST_PARTNER_TOKEN,
    CPF_HASH_KEY: TEST_CPF_HASH_KEY,
    CALLBACK_ALLOWED_IPS: '127.0.0.1/32',
    HOST: '127.0.0.1',
    PORT: '0',
  });
  t.equal((await gateway.exited).code, 1);
  const lines = jsonLines([...gateway.stdout, ...gateway.stderr]);
  t.same(
    lines.filter((l) => 'notJson' in l),
    [],
    'every line it wrote is JSON',
  );
  const warning = lines.find((l) => typeof l.msg === 'string' && l.msg.includes('SECURITY WARNING'));
  t.match(warning, { level: 'warn', time: ISO }, 'the warning is there, as a warn line');
  t.notMatch(JSON.stringify(lines), 'pw-in-the-url');
});

t.test('npm run migrate: the same', async (t) => {
  const port = await closedPort();
  const migrate = startProcess(
    t,
    { NODE_ENV: 'production', DATABASE_URL: `postgres://postgres@127.0.0.1:${port}/x?sslmode=require` },
    'src/db/migrate-cli.ts',
  );
  t.equal((await migrate.exited).code, 1);
  const lines = jsonLines([...migrate.stdout, ...migrate.stderr]);
  t.same(
    lines.filter((l) => 'notJson' in l),
    [],
    'every line it wrote is JSON',
  );
  t.ok(lines.some((l) => l.level === 'warn' && typeof l.msg === 'string' && l.msg.includes('SECURITY WARNING')));
});
