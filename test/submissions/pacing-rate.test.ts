import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t from 'tap';
import type { SandboxStats } from '../../src/sandbox/faults.js';
import { buildTestApp, TEST_PARTNER_TOKEN } from '../helpers/app.js';
import { ENGINE, freshDatabase } from '../helpers/database.js';
import { httpRequest } from '../helpers/http.js';
import { startProcess } from '../helpers/process.js';
import { until } from '../helpers/until.js';
import { validRequest } from './fixtures.js';
import { submitAsync, twice } from './pacing-fixtures.js';

// Two gateway instances on one PostgreSQL hold the provider's rate together, counted where the
// provider would count it: at the sandbox, in a process of its own. (On PGlite there is one process
// by design; the shared pace's rules are the same, and queued*.test.ts runs them there.)

const submitSync = (app: Awaited<ReturnType<typeof buildTestApp>>['app'], customerUuid: string) =>
  app.inject({ method: 'POST', url: '/v1/underwritings', headers: { 'content-type': 'application/json' }, payload: JSON.stringify(validRequest({ customerUuid })) });

// Two instances share a PostgreSQL server: on PGlite this file holds no test (as durability.test.ts).
if (ENGINE === 'postgres') t.test('two instances together call the provider at most PROVIDER_MAX_RPS times in any second, each customer once', async (t) => {
  // The sandbox in a process of its own: it counts arrivals by its own clock, as a provider would,
  // unaffected by the gateways' event loop.
  const dataDir = await mkdtemp(path.join(tmpdir(), 'ugw-pacing-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const sandbox = startProcess(
    t,
    { SANDBOX_HOST: '127.0.0.1', SANDBOX_PORT: '0', SANDBOX_DELAY_MS: '0', SANDBOX_PARTNER_TOKEN: TEST_PARTNER_TOKEN, SANDBOX_DATA_DIR: dataDir },
    'src/sandbox/server.ts',
  );
  const listening = await sandbox.waitForLog((e) => typeof e.msg === 'string' && e.msg.startsWith('sandbox provider listening at '));
  const base = (listening.msg as string).replace('sandbox provider listening at ', '');
  const stats = async () => (await httpRequest(`${base}/_sandbox/stats`, { method: 'GET' })).json as SandboxStats;

  const database = await freshDatabase(t);
  const env = { PROVIDER_BASE_URL: base, PROVIDER_MAX_RPS: '8' };
  const gateways = [await buildTestApp(t, { database, env }), await buildTestApp(t, { database, env })];
  const customers = Array.from({ length: 32 }, (_, i) => `paced-${i}`);
  const started = Date.now();
  // Half queued on each instance, and a synchronous submit on each besides.
  await Promise.all(customers.map((c, i) => submitAsync(gateways[i % 2]!.app, c).then((r) => t.equal(r.statusCode, 202))));
  const sync = await Promise.all(['paced-sync-a', 'paced-sync-b'].map((c, i) => submitSync(gateways[i]!.app, c)));
  for (const r of sync) t.equal(r.statusCode, 202, 'a synchronous submit waits its turn within its send window');
  await until(async () => Object.keys((await stats()).received).length === customers.length + 2, 30_000);
  const seen = await stats();
  const perSecond = Object.values(seen.perSecond);
  t.ok(Math.max(...perSecond) <= 8, `at most 8 in any second at the sandbox (saw ${JSON.stringify(seen.perSecond)})`);
  t.same(twice(seen), [], 'no customer received twice');
  t.ok(Date.now() - started >= 3000, '34 calls at 8 a second take more than 3 s');
});

