import { once } from 'node:events';
import net from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { freshDatabaseUrl, SERVER_URL } from './helpers/database.js';
import { startProcess } from './helpers/process.js';

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

/** Where a gateway that gets as far as listening keeps its data: its own database, or a fresh DATA_DIR. */
async function storage(t: Test): Promise<Record<string, string>> {
  if (SERVER_URL) return { DATABASE_URL: await freshDatabaseUrl(t) };
  const dir = await mkdtemp(path.join(tmpdir(), 'ugw-startup-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return { DATA_DIR: dir };
}

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
