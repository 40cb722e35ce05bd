import { mkdtemp, rm } from 'node:fs/promises';
import { once } from 'node:events';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t from 'tap';
import { SANDBOX_DEFAULT_CPFS } from '../../src/sandbox/config.js';
import { SANDBOX_MODE_WARNING } from '../../src/sandbox/mode.js';
import { httpRequest } from '../helpers/http.js';
import { startProcess } from '../helpers/process.js';

/** A port that was free a moment ago: bind port 0, read it, release it. */
async function freePort(): Promise<number> {
  const server = net.createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

// Genuinely long work: two real gateways (each loading the app's import graph, PGlite opening
// and migrating a data directory) started one after the other, plus a third that must fail. A few
// seconds each when idle, but past the suite's 120 s per-file bound on a machine at load 20.
t.setTimeout(300_000);

const SCENARIOS = [
  { customerUuid: 'demo-cost-saving', cpf: SANDBOX_DEFAULT_CPFS.costSavingReject, costSavingEnabled: true, decision: 'filtered' },
  { customerUuid: 'demo-standard-reject', cpf: SANDBOX_DEFAULT_CPFS.standardReject, costSavingEnabled: false, decision: 'declined' },
  { customerUuid: 'demo-approve', cpf: SANDBOX_DEFAULT_CPFS.approve, costSavingEnabled: false, decision: 'approved' },
] as const;

t.test('npm start with nothing configured runs the three sandbox CPFs end to end, and they survive a restart', async (t) => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'ugw-sandbox-mode-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const sandboxPort = await freePort();
  // Exactly what a newcomer has: no DATABASE_URL, no PROVIDER_BASE_URL, no PARTNER_TOKEN.
  const env = { HOST: '127.0.0.1', PORT: '0', SANDBOX_PORT: String(sandboxPort), DATA_DIR: dataDir, SANDBOX_DELAY_MS: '200' };

  const first = startProcess(t, env);
  const base = await first.listening();
  const warning = await first.waitForLog((e) => e.msg === SANDBOX_MODE_WARNING);
  t.equal(warning.level, 'warn', 'the sandbox-mode line is a warning');
  t.equal(warning.providerBaseUrl, `http://127.0.0.1:${sandboxPort}`);
  t.match(warning.msg, /nothing reaches the real provider.*set PROVIDER_BASE_URL and PARTNER_TOKEN/);

  for (const { decision, ...body } of SCENARIOS) {
    const submitted = await httpRequest(`${base}/v1/underwritings`, { body });
    t.equal(submitted.status, 202, `${body.customerUuid} submitted`);
    t.match(submitted.json, { customerUuid: body.customerUuid, status: 'submitted' });

    const read = await httpRequest(`${base}/v1/underwritings/${body.customerUuid}?wait=15`);
    t.equal(read.status, 200);
    t.match(read.json, { customerUuid: body.customerUuid, status: 'completed', decision });
    t.equal(read.json.result.serviceType, 'CREDIT_SCORE');
    t.notOk(JSON.stringify(read.json).includes(body.cpf), 'the full CPF is never returned');
  }
  const logs = first.stdout.join('\n');
  for (const { cpf } of SCENARIOS) t.notOk(logs.includes(cpf), 'no CPF is logged');

  first.child.kill('SIGTERM');
  t.equal((await first.exited).code, 0, 'it stops cleanly, simulator included');

  const second = startProcess(t, env);
  const again = await second.listening();
  for (const { customerUuid, decision } of SCENARIOS) {
    const read = await httpRequest(`${again}/v1/underwritings/${customerUuid}`);
    t.equal(read.status, 200);
    t.match(read.json, { customerUuid, status: 'completed', decision }, `${customerUuid} is still there`);
  }
  second.child.kill('SIGTERM');
  t.equal((await second.exited).code, 0);
});

t.test('in sandbox mode a bad SANDBOX_* variable stops the gateway with exit 1 and one line for it', async (t) => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'ugw-sandbox-mode-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const gateway = startProcess(t, { HOST: '127.0.0.1', PORT: '0', DATA_DIR: dataDir, SANDBOX_DELAY_MS: 'soon' });
  t.equal((await gateway.exited).code, 1);
  t.same(gateway.stderr, ['SANDBOX_DELAY_MS: must be a whole number from 0 to 3600000']);
});
