import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { once } from 'node:events';
import t, { type Test } from 'tap';
import { buildTestApp } from '../helpers/app.js';
import { validRequest } from '../submissions/fixtures.js';

// A provider whose idle timeout is shorter than the gateway's keeps no promise about a call written
// just as it closes the connection: the call gets no answer, and the gateway cannot tell that it was
// never read (submit_failed, possibly received; one submit in 40 with a provider closing after under
// 10 s). So the gateway closes its idle connections first: after PROVIDER_KEEP_ALIVE_MS (4 s by
// default, below the common 5 s), whether or not the provider says how long it keeps them.

/** A provider that keeps idle connections a minute and, as many servers do, sends no Keep-Alive hint. */
async function silentProvider(t: Test) {
  const sockets: Socket[] = [];
  const server = http.createServer((req, res) => {
    req.resume();
    // An explicit Connection header: Node then sends no `Keep-Alive: timeout=` of its own.
    req.on('end', () => void res.writeHead(202, { 'content-type': 'application/json', connection: 'keep-alive' }).end('{}'));
  });
  server.keepAliveTimeout = 60_000;
  server.on('connection', (socket: Socket) => void sockets.push(socket));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    server.close();
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, sockets };
}

for (const [setting, env, bound] of [
  ['by default', {}, 5_000],
  ['PROVIDER_KEEP_ALIVE_MS=300', { PROVIDER_KEEP_ALIVE_MS: '300' }, 2_000],
] as const) {
  t.test(`the gateway closes an idle provider connection before the provider would (${setting})`, async (t) => {
    const provider = await silentProvider(t);
    const gw = await buildTestApp(t, { env: { PROVIDER_BASE_URL: provider.url, ...env } });
    const res = await gw.app.inject({ method: 'POST', url: '/v1/underwritings', payload: validRequest() });
    t.equal(res.statusCode, 202, res.body);
    const answered = performance.now();
    t.equal(provider.sockets.length, 1, 'one connection');
    const socket = provider.sockets[0]!;
    if (!socket.destroyed) await once(socket, 'close');
    const idle = performance.now() - answered;
    t.ok(idle < bound, `closed by the gateway after ${Math.round(idle)} ms idle, under ${bound} ms`);
    const again = await gw.app.inject({ method: 'POST', url: '/v1/underwritings', payload: validRequest({ customerUuid: 'keep-alive-2' }) });
    t.equal(again.statusCode, 202, 'the next call goes out on a new connection');
    t.equal(provider.sockets.length, 2);
  });
}
