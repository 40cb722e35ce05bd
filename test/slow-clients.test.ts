import net from 'node:net';
import t from 'tap';
import { SERVER_TIMEOUTS } from '../src/app.js';
import { buildTestApp, listen } from './helpers/app.js';

// Short bounds so the test takes seconds; a deployment keeps SERVER_TIMEOUTS.
const TIMEOUTS = { headersTimeoutMs: 400, requestTimeoutMs: 800, checkIntervalMs: 50 };
/**
 * A bound holds to within the check interval; the rest is scheduling slack on a busy machine (600 ms
 * was not enough at load 8-16). What the bounds rule out is far longer: the deployment's 10 s / 30 s
 * and Node's defaults (60 s / 300 s).
 */
const SLACK_MS = 3000;
/** The server never closed the slow connection: well past every bound above, well short of a deployment's. */
const NEVER_CLOSED_MS = 8000;

interface Cut {
  afterMs: number;
  /** What the server wrote before closing. */
  answer: string;
}

/** Opens a real socket from `localAddress`, lets `drive` write to it slowly, and resolves when the server closes it. */
function slowClient(url: string, drive: (socket: net.Socket) => void, localAddress = '127.0.0.1'): Promise<Cut> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const started = Date.now();
    let answer = '';
    const socket = net.connect({ host: hostname, port: Number(port), localAddress }, () => drive(socket));
    const trickle: NodeJS.Timeout[] = [];
    socket.on('data', (d: Buffer) => void (answer += d.toString('utf8')));
    socket.on('error', () => {});
    socket.on('close', () => {
      trickle.forEach(clearInterval);
      resolve({ afterMs: Date.now() - started, answer });
    });
    setTimeout(() => {
      reject(new Error('the server never closed the slow connection'));
      socket.destroy();
    }, NEVER_CLOSED_MS).unref();
    (socket as net.Socket & { trickle?: NodeJS.Timeout[] }).trickle = trickle;
  });
}

/** Writes one chunk every interval until the socket closes. */
function every(socket: net.Socket, ms: number, chunk: string): void {
  const timer = setInterval(() => socket.writable && socket.write(chunk), ms);
  (socket as net.Socket & { trickle?: NodeJS.Timeout[] }).trickle?.push(timer);
}

const bodyOf = (answer: string) => JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as unknown;

t.test('a deployment cuts off slow clients within seconds, and keeps idle keep-alive connections past a load balancer idle timeout', async (t) => {
  t.ok(SERVER_TIMEOUTS.headersTimeoutMs <= 10_000);
  t.ok(SERVER_TIMEOUTS.requestTimeoutMs <= 30_000);
  t.ok(SERVER_TIMEOUTS.headersTimeoutMs <= SERVER_TIMEOUTS.requestTimeoutMs);
  t.ok(SERVER_TIMEOUTS.keepAliveTimeoutMs > 60_000);
  const { app } = await buildTestApp(t);
  await app.ready();
  t.equal(app.server.headersTimeout, SERVER_TIMEOUTS.headersTimeoutMs);
  t.equal(app.server.requestTimeout, SERVER_TIMEOUTS.requestTimeoutMs);
});

t.test('a client sending its headers slowly is cut off within the headers timeout, with the contract error body', async (t) => {
  const { app } = await buildTestApp(t, { serverTimeouts: TIMEOUTS });
  const url = await listen(app);
  const cut = await slowClient(url, (socket) => {
    socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n');
    every(socket, 100, 'X-Slow: 1\r\n');
  });
  t.ok(cut.afterMs < TIMEOUTS.headersTimeoutMs + SLACK_MS, `closed after ${cut.afterMs} ms`);
  t.match(cut.answer, /^HTTP\/1\.1 408 /);
  t.same(bodyOf(cut.answer), { error: 'request_timeout', message: 'the request was not received in time' });
});

t.test('a client sending a body slowly is cut off within the request timeout', async (t) => {
  const { app, database } = await buildTestApp(t, { serverTimeouts: TIMEOUTS });
  const url = await listen(app);
  const cut = await slowClient(url, (socket) => {
    socket.write('POST /v1/underwritings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{');
    every(socket, 100, ' ');
  });
  t.ok(cut.afterMs < TIMEOUTS.requestTimeoutMs + SLACK_MS, `closed after ${cut.afterMs} ms`);
  t.match(cut.answer, /^HTTP\/1\.1 408 /);
  t.same(await database.db.selectFrom('underwriting_requests').select('id').execute(), [], 'nothing stored');
});

t.test('a refused peer sending a body slowly is cut off within the request timeout too', async (t) => {
  const { app } = await buildTestApp(t, { serverTimeouts: TIMEOUTS });
  const url = await listen(app);
  const cut = await slowClient(
    url,
    (socket) => {
      socket.write('POST /v1/callbacks/underwriting HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{');
      every(socket, 100, ' ');
    },
    '127.0.0.2',
  );
  t.match(cut.answer, /^HTTP\/1\.1 403 /, 'refused before the body');
  t.ok(cut.afterMs < TIMEOUTS.requestTimeoutMs + SLACK_MS, `closed after ${cut.afterMs} ms`);
});

t.test('a path parameter too long answers 414 with the contract error body', async (t) => {
  const { app } = await buildTestApp(t);
  const res = await app.inject({ method: 'GET', url: `/v1/underwritings/${'a'.repeat(300)}` });
  t.equal(res.statusCode, 414);
  t.same(res.json(), { error: 'uri_too_long', message: 'the URL is too long' });
});

t.test('a URL beyond the header limit answers 431 with the contract error body', async (t) => {
  const { app } = await buildTestApp(t);
  const url = await listen(app);
  const cut = await slowClient(url, (socket) => socket.write(`GET /v1/underwritings?x=${'a'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`));
  t.match(cut.answer, /^HTTP\/1\.1 431 /);
  t.same(bodyOf(cut.answer), { error: 'headers_too_large', message: 'the request line or headers are too large' });
});
