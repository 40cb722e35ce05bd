import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t from 'tap';
import { TEST_CPF_HASH_KEY, TEST_PARTNER_TOKEN } from '../helpers/app.js';
import { freshDatabaseUrl, SERVER_URL } from '../helpers/database.js';
import { httpRequest } from '../helpers/http.js';
import { startProcess } from '../helpers/process.js';
import { startOtlpReceiver } from './otlp-receiver.js';

t.test('at SIGTERM the gateway exports the spans it still holds before it exits', async (t) => {
  const otlp = await startOtlpReceiver(t);
  const dataDir = await mkdtemp(path.join(tmpdir(), 'ugw-trace-shutdown-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const env: Record<string, string> = {
    HOST: '127.0.0.1',
    PORT: '0',
    DATA_DIR: dataDir,
    PROVIDER_BASE_URL: 'http://127.0.0.1:9',
    PARTNER_TOKEN: TEST_PARTNER_TOKEN,
    CPF_HASH_KEY: TEST_CPF_HASH_KEY,
    OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
    // Far longer than the test: only the shutdown's flush can send the span.
    OTEL_BSP_SCHEDULE_DELAY: '600000',
  };
  if (SERVER_URL) env.DATABASE_URL = await freshDatabaseUrl(t);
  const server = startProcess(t, env);
  const base = await server.listening();
  t.equal((await httpRequest(`${base}/healthz`)).status, 200);
  t.same(otlp.spans, [], 'nothing exported yet');
  server.child.kill('SIGTERM');
  const { code } = await server.exited;
  t.equal(code, 0);
  t.match(otlp.spans, [{ name: 'GET /healthz', kind: 2, resource: { 'service.name': 'underwriting-gateway' } }]);
});
