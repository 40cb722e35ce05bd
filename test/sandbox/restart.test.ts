import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { SANDBOX_DEFAULT_CPFS, SANDBOX_DEFAULT_PARTNER_TOKEN } from '../../src/sandbox/config.js';
import { migratedStorage } from '../helpers/database.js';
import { httpRequest } from '../helpers/http.js';
import { startProcess } from '../helpers/process.js';

// A provider that has accepted a request delivers its result even if it restarts meanwhile: so does
// the sandbox, alone (npm run sandbox) and in-process (sandbox mode). The delay is long enough that
// the process is stopped before the result is due.
const DELAY_MS = '4000';

async function tempDir(t: Test): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'ugw-sandbox-restart-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** Fails the wait after ms instead of letting the test hang to its timeout. */
function within<T>(ms: number, what: string, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: nothing after ${ms} ms`)), ms);
  });
  return Promise.race([work, deadline]).finally(() => clearTimeout(timer));
}

t.test('npm run sandbox delivers, after a restart, a result it accepted before it was stopped', async (t) => {
  const received: Array<Record<string, unknown>> = [];
  let arrived!: () => void;
  const delivered = new Promise<void>((resolve) => (arrived = resolve));
  const receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c)).on('end', () => {
      received.push(JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"received":true}');
      arrived();
    });
  });
  receiver.listen(0, '127.0.0.1');
  await once(receiver, 'listening');
  t.teardown(() => new Promise<void>((resolve) => receiver.close(() => resolve())));

  const env = {
    SANDBOX_HOST: '127.0.0.1',
    SANDBOX_PORT: '0',
    SANDBOX_DELAY_MS: DELAY_MS,
    SANDBOX_DATA_DIR: await tempDir(t),
    SANDBOX_CALLBACK_URL: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/callback`,
  };
  const listening = (e: Record<string, any>) => typeof e.msg === 'string' && e.msg.startsWith('sandbox provider listening at ');
  const first = startProcess(t, env, 'src/sandbox/server.ts');
  const base = ((await first.waitForLog(listening)).msg as string).replace('sandbox provider listening at ', '');
  const accepted = await httpRequest(`${base}/api/partner/credit/cards/underwritings`, {
    headers: { 'x-partner-auth': SANDBOX_DEFAULT_PARTNER_TOKEN },
    body: { customerUuid: 'restart-alone', cpf: SANDBOX_DEFAULT_CPFS.approve, costSavingEnabled: false },
  });
  t.equal(accepted.status, 202);
  first.child.kill('SIGTERM');
  t.equal((await first.exited).code, 0);
  t.equal(received.length, 0, 'stopped before the result was due');

  const second = startProcess(t, env, 'src/sandbox/server.ts');
  await within(30_000, 'the delivery after the restart', delivered);
  t.match(received, [{ customerUuid: 'restart-alone', serviceType: 'CREDIT_SCORE', response: { limit: Number } }]);
  second.child.kill('SIGTERM');
  t.equal((await second.exited).code, 0);
});

t.test('in sandbox mode a request submitted just before Ctrl-C completes after the restart', async (t) => {
  const env: Record<string, string> = {
    HOST: '127.0.0.1',
    PORT: '0',
    SANDBOX_PORT: '0',
    SANDBOX_DELAY_MS: DELAY_MS,
    ...(await migratedStorage(t, 'ugw-sandbox-restart-')),
  };

  const first = startProcess(t, env);
  const base = await first.listening();
  const submitted = await httpRequest(`${base}/v1/underwritings`, {
    body: { customerUuid: 'restart-mode', cpf: SANDBOX_DEFAULT_CPFS.standardReject, costSavingEnabled: false },
  });
  t.equal(submitted.status, 202);
  first.child.kill('SIGINT');
  t.equal((await first.exited).code, 0);

  const second = startProcess(t, env);
  const again = await second.listening();
  const read = await httpRequest(`${again}/v1/underwritings/restart-mode?wait=30`);
  t.equal(read.status, 200);
  t.match(read.json, { customerUuid: 'restart-mode', status: 'completed', decision: 'declined' });
  second.child.kill('SIGTERM');
  t.equal((await second.exited).code, 0);
});
