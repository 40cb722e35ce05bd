import { performance } from 'node:perf_hooks';
import t from 'tap';
import { readinessCheck } from '../../src/ops/routes.js';
import { buildTestApp, listen } from '../helpers/app.js';
import { SERVER_URL } from '../helpers/database.js';
import { httpRequest } from '../helpers/http.js';
import { databaseBehindRelay } from '../helpers/relay.js';

/** The contract's bound: ready again this soon after the database returns, with no other traffic. */
const BACK_WITHIN_MS = 1000;

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
    const { database, relay } = await databaseBehindRelay(t);
    const { app } = await buildTestApp(t, { database });
    const base = await listen(app);
    t.equal((await httpRequest(`${base}/readyz`)).status, 200, 'ready');

    relay.cut();
    await readyzBecomes(base, 503, 5000);
    // What a load balancer sent before it took the instance out: a route failing on storage.
    t.equal((await httpRequest(`${base}/v1/underwritings?limit=1`)).status, 503, 'a route fails meanwhile');
    t.equal((await httpRequest(`${base}/readyz`)).status, 503, 'still not ready');

    relay.restore();
    const backIn = await readyzBecomes(base, 200, 10_000);
    t.ok(backIn < BACK_WITHIN_MS, `ready again ${Math.round(backIn)} ms after the database returned (bound ${BACK_WITHIN_MS} ms)`);
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
