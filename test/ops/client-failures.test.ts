import net from 'node:net';
import type { FastifyInstance } from 'fastify';
import t from 'tap';
import { buildTestApp, listen } from '../helpers/app.js';
import { httpRequest } from '../helpers/http.js';
import type { LogCapture } from '../helpers/logs.js';

// Issue 32: a client closing its own connection mid-body made Node report `aborted` / ECONNRESET,
// which was taken for a lost database connection: "database unavailable" at error level and
// /readyz 503 for 5 s, from any peer, on any path. Only the database's own failures count.

const TIMEOUTS = { headersTimeoutMs: 400, requestTimeoutMs: 800, checkIntervalMs: 50 };
/** A peer outside every allowlist (all of 127/8 reaches a listener on 127.0.0.1). */
const STRANGER = '127.0.0.2';
const DEADLINE_MS = 10_000;

/** A raw socket from STRANGER; resolves once it is closed (by the server, or by drive). */
function rawClient(url: string, drive: Drive, arrived: Promise<void>): Promise<void> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: hostname, port: Number(port), localAddress: STRANGER }, () => drive(socket, arrived));
    const bound = setTimeout(() => {
      socket.destroy();
      reject(new Error('the connection was never closed'));
    }, DEADLINE_MS);
    socket.on('error', () => {});
    // Read (and drop) what the server answers, so that its FIN is seen: it has given up on the request.
    socket.resume();
    socket.on('end', () => socket.destroy());
    socket.on('close', () => {
      clearTimeout(bound);
      resolve();
    });
  });
}

interface Stranger {
  /** Resolves when the stranger's next request has been routed (its body is read next). */
  arrived(): Promise<void>;
  /** Every status the app sent the stranger (its error handler's too, even to a closed socket). */
  statuses: number[];
}

function watchStranger(app: FastifyInstance): Stranger {
  const statuses: number[] = [];
  let arrive = () => {};
  app.addHook('onRequest', (request, _reply, done) => {
    if (request.socket.remoteAddress === STRANGER) arrive();
    done();
  });
  app.addHook('onSend', (request, reply, payload, done) => {
    if (request.socket.remoteAddress === STRANGER) statuses.push(reply.statusCode);
    done(null, payload);
  });
  return { arrived: () => new Promise<void>((resolve) => (arrive = resolve)), statuses };
}

/** Polls until `list` has an entry: the app has finished with the stranger's request. */
async function answered(list: number[]): Promise<number> {
  const deadline = Date.now() + DEADLINE_MS;
  while (list.length === 0) {
    if (Date.now() > deadline) throw new Error('the app never answered the stranger');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return list[0]!;
}

function storageErrors(logs: LogCapture): unknown[] {
  return logs.entries().filter((e) => /database|storage/i.test(String(e.msg)) || e.level === 'error' || e.level === 'fatal');
}

const partialUpload = (path: string) =>
  `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a":`;

type Drive = (socket: net.Socket, arrived: Promise<void>) => void;

const causes: Array<{ name: string; drive: Drive }> = [
  {
    name: 'an aborted upload (FIN mid-body)',
    drive: (socket, arrived) => {
      socket.write(partialUpload('/nope'));
      void arrived.then(() => socket.end());
    },
  },
  {
    name: 'a reset connection (RST mid-body)',
    drive: (socket, arrived) => {
      socket.write(partialUpload('/healthz'));
      void arrived.then(() => socket.resetAndDestroy());
    },
  },
  {
    name: 'a slow client timed out mid-body',
    drive: (socket) => socket.write(partialUpload('/nope')),
  },
];

// One instance for every cause, with short server timeouts (the slow client's is cut in under a second).
const { app, logs } = await buildTestApp(t, { serverTimeouts: TIMEOUTS });
const stranger = watchStranger(app);
const url = await listen(app);

for (const cause of causes) {
  t.test(`${cause.name} moves neither /readyz nor the logs' storage errors`, async (t) => {
    stranger.statuses.length = 0;
    logs.lines.length = 0;
    t.equal((await httpRequest(`${url}/readyz`)).status, 200, 'ready before');
    await rawClient(url, cause.drive, stranger.arrived());
    t.ok((await answered(stranger.statuses)) < 500, 'the stranger is answered as a client error');
    const ready = await httpRequest(`${url}/readyz`);
    t.equal(ready.status, 200, 'ready after');
    t.same(storageErrors(logs), [], 'no storage error logged');
  });
}
