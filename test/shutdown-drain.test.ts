import t, { type Test } from 'tap';
import { startGatewayProcess } from './helpers/gateway-process.js';

// SIGTERM's drain, on the gateway as npm start runs it (its own file: a process start on PGlite
// under load takes a good share of a test file's time budget).

const startDraining = (t: Test, drainMs: number) => startGatewayProcess(t, { SHUTDOWN_DRAIN_MS: String(drainMs) });

const DRAINING = 'draining: /readyz answers 503, everything else is still served';

t.test('with SHUTDOWN_DRAIN_MS, SIGTERM first makes /readyz 503 for that long while everything else is served, then stops', async (t) => {
  // Long enough for the three requests below to land inside the drain on a slow, loaded host (at
  // 2 s they did not always); the check on when it closed still proves the drain's length.
  const drainMs = 8000;
  const { server, base } = await startDraining(t, drainMs);
  t.equal((await fetch(`${base}/readyz`)).status, 200, 'ready before the signal');

  const signalled = Date.now();
  server.child.kill('SIGTERM');
  await server.waitForLog((e) => e.msg === DRAINING);
  const ready = await fetch(`${base}/readyz`);
  t.equal(ready.status, 503, 'unready while draining');
  t.same(await ready.json(), { error: 'shutting_down', message: 'this instance is shutting down; use another' });
  t.equal((await fetch(`${base}/healthz`)).status, 200, 'alive, and still answering other routes');
  t.equal((await fetch(`${base}/v1/underwritings/nobody`)).status, 404, 'the API is still served');

  const closing = await server.waitForLog((e) => e.msg === 'shutting down: finishing in-flight requests');
  t.ok(Date.parse(closing.time) - signalled >= drainMs - 50, `closed ${Date.parse(closing.time) - signalled} ms after the signal`);
  t.equal((await server.exited).code, 0);
});

t.test('a second signal cuts the drain short, and the shutdown goes on as usual', async (t) => {
  const { server } = await startDraining(t, 600_000);
  server.child.kill('SIGTERM');
  await server.waitForLog((e) => e.msg === DRAINING);
  server.child.kill('SIGTERM');
  // Without it, the drain would last ten minutes: the test's own time limit would end first.
  t.equal((await server.exited).code, 0);
  t.ok(server.stdout.some((l) => l.includes('"msg":"stopped"')), 'it closed as usual');
});
