import { once } from 'node:events';
import net from 'node:net';
import t, { type Test } from 'tap';
import { migratedStorage, SERVER_URL } from './helpers/database.js';
import { httpRequest } from './helpers/http.js';
import { startProcess } from './helpers/process.js';
import { SANDBOX_DEFAULT_CPFS, SANDBOX_DEFAULT_PORT } from '../src/sandbox/config.js';
import { SANDBOX_MODE_WARNING } from '../src/sandbox/mode.js';

// What a newcomer sees when the start goes wrong: one clear line on stderr and exit 1, never a hang.

/**
 * A port held by another listener for the whole test; it accepts connections and never answers.
 * Teardown destroys what it accepted: close() waits for every connection to end, and one it never
 * reads never sees its peer leave, so the teardown never settled (the gateway that gave up on it).
 */
async function takenPort(t: Test): Promise<number> {
  const accepted = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    accepted.add(socket);
    socket.on('error', () => {}).on('close', () => accepted.delete(socket));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(async () => {
    for (const socket of accepted) socket.destroy();
    await new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
  });
  return (server.address() as net.AddressInfo).port;
}

/**
 * Where a gateway that gets as far as listening keeps its data: a migrated database of its own
 * (these tests are about ports; sandbox/mode.test.ts starts on an empty DATA_DIR).
 */
const storage = (t: Test) => migratedStorage(t, 'ugw-startup-');

t.test('a DATA_DIR that cannot be created stops the start with exit 1 and says so, instead of hanging', async (t) => {
  const gateway = startProcess(t, { HOST: '127.0.0.1', PORT: '0', SANDBOX_PORT: '0', DATA_DIR: '/proc/nope' });
  t.equal((await gateway.exited).code, 1);
  t.match(gateway.stderr.join('\n'), /DATA_DIR: the embedded database cannot be opened in \/proc\/nope/);
});

t.test('a database that cannot be used is never logged as opened', async (t) => {
  const missing = SERVER_URL ? new URL(SERVER_URL) : new URL(`postgres://postgres@127.0.0.1:${await takenPort(t)}/x`);
  if (SERVER_URL) missing.pathname = '/ugw_no_such_database';
  const gateway = startProcess(t, {
    HOST: '127.0.0.1',
    PORT: '0',
    SANDBOX_PORT: '0',
    DATABASE_URL: missing.toString(),
  });
  t.equal((await gateway.exited).code, 1);
  t.match(gateway.stderr.join('\n'), /cannot use the database at DATABASE_URL: /);
  t.notOk(gateway.stdout.some((line) => line.includes('database opened')), 'no "database opened" line');
});

t.test('a PORT already in use is named in the error', async (t) => {
  const port = await takenPort(t);
  const gateway = startProcess(t, { HOST: '127.0.0.1', PORT: String(port), SANDBOX_PORT: '0', ...(await storage(t)) });
  t.equal((await gateway.exited).code, 1);
  t.same(gateway.stderr, [
    `PORT: port ${port} on 127.0.0.1 is already in use (another process listens there); stop it or set PORT to a free port`,
  ]);
});

t.test('a SANDBOX_PORT already in use is named in the error, in sandbox mode and for npm run sandbox', async (t) => {
  const port = await takenPort(t);
  const gateway = startProcess(t, { HOST: '127.0.0.1', PORT: '0', SANDBOX_PORT: String(port), ...(await storage(t)) });
  t.equal((await gateway.exited).code, 1);
  t.same(gateway.stderr, [
    `SANDBOX_PORT: port ${port} on 127.0.0.1 is already in use (another process listens there); stop it or set SANDBOX_PORT to a free port`,
  ]);

  const sandbox = startProcess(t, { SANDBOX_HOST: '127.0.0.1', SANDBOX_PORT: String(port) }, 'src/sandbox/server.ts');
  t.equal((await sandbox.exited).code, 1);
  t.same(sandbox.stderr, [
    `SANDBOX_PORT: port ${port} on 127.0.0.1 is already in use (another process listens there); stop it or set SANDBOX_PORT to a free port`,
  ]);
});

/**
 * Holds `port` on 127.0.0.1 for the test. Another process may hold it for a while (the same test in
 * CI's other suite, run at the same time): then it tries again until it can, since a port another
 * process may give up at any moment is not one this test can count on being taken.
 */
async function holdPort(t: Test, port: number): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    const server = net.createServer((socket) => socket.destroy());
    const bound = await new Promise<boolean>((resolve, reject) => {
      server.once('listening', () => resolve(true));
      server.once('error', (err: NodeJS.ErrnoException) => (err.code === 'EADDRINUSE' && attempt < 600 ? resolve(false) : reject(err)));
      server.listen(port, '127.0.0.1');
    });
    if (bound) {
      t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

t.test('nothing configured and the default SANDBOX_PORT taken: sandbox mode takes another port, and the sandbox CPFs still work', async (t) => {
  await holdPort(t, SANDBOX_DEFAULT_PORT);
  const env = { HOST: '127.0.0.1', PORT: '0', SANDBOX_DELAY_MS: '200', ...(await storage(t)) };
  const gateway = startProcess(t, env);
  const base = await gateway.listening();
  const moved = await gateway.waitForLog((e) => e.sandboxPort === SANDBOX_DEFAULT_PORT);
  t.equal(moved.level, 'warn');
  t.match(moved.msg, /SANDBOX_PORT 4010 is taken .* set SANDBOX_PORT to choose its port/);
  t.not(moved.listensAt, SANDBOX_DEFAULT_PORT);
  const mode = await gateway.waitForLog((e) => e.msg === SANDBOX_MODE_WARNING);
  t.equal(mode.providerBaseUrl, `http://127.0.0.1:${moved.listensAt}`, 'the gateway calls the sandbox where it listens');

  const body = { customerUuid: 'demo-approve', cpf: SANDBOX_DEFAULT_CPFS.approve, costSavingEnabled: false };
  t.equal((await httpRequest(`${base}/v1/underwritings`, { body })).status, 202);
  const read = await httpRequest(`${base}/v1/underwritings/demo-approve?wait=15`);
  t.match(read.json, { customerUuid: 'demo-approve', status: 'completed', decision: 'approved' }, 'its callback came back');

  gateway.child.kill('SIGTERM');
  t.equal((await gateway.exited).code, 0);
});
