import http from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t from 'tap';
import { TEST_CPF_HASH_KEY, TEST_PARTNER_TOKEN } from './helpers/app.js';
import { freshDatabaseUrl, SERVER_URL } from './helpers/database.js';
import { startProcess } from './helpers/process.js';

t.test('SIGTERM lets an in-flight request finish, closes the database and exits 0', async (t) => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'ugw-shutdown-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const env: Record<string, string> = {
    HOST: '127.0.0.1',
    PORT: '0',
    DATA_DIR: dataDir,
    PROVIDER_BASE_URL: 'http://127.0.0.1:9',
    PARTNER_TOKEN: TEST_PARTNER_TOKEN,
    CPF_HASH_KEY: TEST_CPF_HASH_KEY,
  };
  if (SERVER_URL) env.DATABASE_URL = await freshDatabaseUrl(t);
  const server = startProcess(t, env);
  const base = await server.listening();

  // A request whose body is still arriving when the signal comes: it is in flight.
  const answered = new Promise<number>((resolve, reject) => {
    const req = http.request(`${base}/nowhere`, { method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.write('{"partial":');
    void server.waitForLog((e) => e.msg === 'shutting down: finishing in-flight requests').then(() => req.end('true}'));
  });
  // Let the server see the request start before signalling.
  await server.waitForLog((e) => e.msg === 'incoming request');
  server.child.kill('SIGTERM');

  t.equal(await answered, 404, 'the in-flight request got its answer');
  const { code } = await server.exited;
  t.equal(code, 0);
  t.ok(server.stdout.some((l) => l.includes('"msg":"stopped"')), 'it said it stopped');
});
