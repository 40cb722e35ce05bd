import { once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import t, { type Test } from 'tap';
import { startGatewayProcess } from './helpers/gateway-process.js';

/** The gateway as `npm start` runs it, on a fresh database. */
const startGateway = (t: Test) => startGatewayProcess(t);

t.test('SIGTERM lets an in-flight request finish, closes the database and exits 0', async (t) => {
  const { server, base } = await startGateway(t);

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
  t.notOk(server.stdout.some((l) => l.includes('draining')), 'without SHUTDOWN_DRAIN_MS, no drain');
});

t.test('a client that keeps its connection open after the answer does not hold shutdown up', async (t) => {
  const { server, base } = await startGateway(t);
  // As a browser tab polling the console: keep-alive, its idle connections kept for a minute.
  const agent = new http.Agent({ keepAlive: true, timeout: 60_000 });
  t.teardown(() => agent.destroy());

  const answered = new Promise<http.IncomingHttpHeaders>((resolve, reject) => {
    const req = http.request(`${base}/nowhere`, { method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.headers));
    });
    req.on('error', reject);
    req.write('{"partial":');
    void server.waitForLog((e) => e.msg === 'shutting down: finishing in-flight requests').then(() => req.end('true}'));
  });
  await server.waitForLog((e) => e.msg === 'incoming request');
  server.child.kill('SIGTERM');

  t.equal((await answered).connection, 'close', 'the answer closes its connection');
  // Else the gateway waits for the connection's keep-alive timeout (72 s), past its grace, and exits 1.
  const { code } = await server.exited;
  t.equal(code, 0, 'stopped within the grace period, database closed');
});

t.test('a connection that has not sent a request does not hold shutdown up', async (t) => {
  const { server, base } = await startGateway(t);
  const { hostname, port } = new URL(base);
  // As a browser opens a spare connection ahead of need, and sends nothing on it.
  const spare = net.connect(Number(port), hostname);
  t.teardown(() => spare.destroy());
  spare.on('error', () => {});
  await once(spare, 'connect');
  const spareClosed = once(spare, 'close');
  // A whole request on a later connection: once it is answered, the server has taken the spare
  // one too (connections are accepted in the order they arrive).
  const health = await fetch(`${base}/healthz`);
  t.equal(health.status, 200);

  server.child.kill('SIGTERM');
  // Node's server.close() does not count such a connection as idle, and no timeout applies to it
  // once the server is closing: without closing it, the gateway waited past its grace and exited 1.
  const { code } = await server.exited;
  t.equal(code, 0, 'stopped within the grace period, database closed');
  await spareClosed;
  t.pass('the gateway closed the spare connection');
});
