import { performance } from 'node:perf_hooks';
import pg from 'pg';
import t from 'tap';
import { readinessCheck } from '../../src/ops/routes.js';
import { buildTestApp, listen } from '../helpers/app.js';
import { SERVER_URL } from '../helpers/database.js';
import { httpRequest } from '../helpers/http.js';
import { databaseBehindRelay, throughRelay } from '../helpers/relay.js';
import { until } from '../helpers/until.js';

/** Polls /readyz every 50 ms until it answers `status`; how long that took. */
async function readyzBecomes(base: string, status: number, boundMs: number): Promise<number> {
  const started = performance.now();
  for (;;) {
    if ((await httpRequest(`${base}/readyz`)).status === status) return performance.now() - started;
    if (performance.now() - started > boundMs) throw new Error(`/readyz did not answer ${status} within ${boundMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

if (SERVER_URL) {
  t.test('an idle instance is ready again within 1 s of the database returning, with no route traffic', async (t) => {
    const { database, relay, url } = await databaseBehindRelay(t);
    const { app } = await buildTestApp(t, { database });
    const base = await listen(app);
    t.equal((await httpRequest(`${base}/readyz`)).status, 200, 'ready');

    relay.cut();
    await readyzBecomes(base, 503, 5000);
    // What a load balancer sent before it took the instance out: a route failing on storage.
    t.equal((await httpRequest(`${base}/v1/underwritings?limit=1`)).status, 503, 'a route fails meanwhile');
    t.equal((await httpRequest(`${base}/readyz`)).status, 503, 'still not ready');

    relay.restore();
    // The contract's 1 s holds when every /readyz probes anew (no cached verdict, no backoff): so
    // once the database answers a new connection through the relay, the very next /readyz is 200.
    // (Timing the return instead counted a new PostgreSQL connection, which took over 1 s at load 8-16.)
    const returned = performance.now();
    await until(async () => {
      const client = new pg.Client({ connectionString: throughRelay(url, relay) });
      client.on('error', () => {});
      try {
        await client.connect();
        await client.query('select 1');
        return true;
      } catch {
        return false;
      } finally {
        await client.end().catch(() => {});
      }
    }, 10_000, 'the database answering through the relay');
    const back = await httpRequest(`${base}/readyz`);
    t.equal(back.status, 200, `ready at the first /readyz once the database answered (${Math.round(performance.now() - returned)} ms after its return)`);
  });
}

t.test('concurrent /readyz calls share one probe', async (t) => {
  let probes = 0;
  let finish!: () => void;
  const check = readinessCheck({
    probe: () => {
      probes += 1;
      return new Promise<void>((resolve) => (finish = resolve));
    },
  });
  const calls = [check(), check(), check()];
  t.equal(probes, 1, 'one probe for three calls');
  finish();
  await Promise.all(calls);
  const next = check();
  t.equal(probes, 2, 'a later call probes again (never a cached verdict)');
  finish();
  await next;
});
