import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Webhook } from 'standardwebhooks';
import t from 'tap';
import { SANDBOX_DEFAULT_CPFS } from '../../src/sandbox/config.js';
import { httpRequest } from '../helpers/http.js';
import { startProcess } from '../helpers/process.js';
import { webhookSecret } from './fixtures.js';
import { startReceiver } from './receiver.js';

async function freePort(): Promise<number> {
  const server = net.createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  server.close();
  await once(server, 'close');
  return port;
}

t.test('sandbox mode (embedded PGlite, in-process simulator) pushes outcome events too', async (t) => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'ugw-sandbox-events-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const receiver = await startReceiver(t);
  const secret = webhookSecret();
  const gateway = startProcess(t, {
    HOST: '127.0.0.1',
    PORT: '0',
    SANDBOX_PORT: String(await freePort()),
    DATA_DIR: dataDir,
    SANDBOX_DELAY_MS: '100',
    EVENT_WEBHOOK_URLS: `${receiver.url}/hooks?key=sandboxQuerySecret`,
    EVENT_WEBHOOK_SECRET: secret,
  });
  const base = await gateway.listening();
  const submitted = await httpRequest(`${base}/v1/underwritings`, {
    body: { customerUuid: 'demo-push', cpf: SANDBOX_DEFAULT_CPFS.approve, costSavingEnabled: false },
  });
  t.equal(submitted.status, 202);
  const [got] = await receiver.count(1);
  const event = new Webhook(secret).verify(got!.body, got!.headers as Record<string, string>) as Record<string, any>;
  t.match(event, { type: 'underwriting.completed', data: { customerUuid: 'demo-push', status: 'completed', decision: 'approved' } });
  t.notMatch(gateway.stdout.join('\n'), /sandboxQuerySecret/, 'the URL is logged only redacted');
  t.match(gateway.stdout.join('\n'), /pushing outcome events/);
});
