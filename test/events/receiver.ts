import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Test } from 'tap';

export interface Received {
  headers: http.IncomingHttpHeaders;
  body: string;
  json: { id: string; type: string; timestamp: string; data: Record<string, any> };
  at: number;
  url: string;
}

/** What the receiver answers one request with: a status (with headers), or 'hang' (never answer). */
export type Answer = number | { status: number; headers: Record<string, string> } | 'hang';

export interface Receiver {
  url: string;
  received: Received[];
  /** Resolves once `count` requests in all have arrived; rejects, saying so, after timeoutMs. */
  count(count: number, timeoutMs?: number): Promise<Received[]>;
  /**
   * Resolves once a request satisfying the predicate has arrived, with everything received until
   * then; rejects after timeoutMs, naming `what` (default: the predicate's source).
   */
  waitFor(predicate: (r: Received) => boolean, timeoutMs?: number, what?: string): Promise<Received[]>;
  /** Decides each answer; default 200. */
  answer: (r: Received, n: number) => Answer;
  close(): Promise<void>;
}

/**
 * How long a wait for requests lasts by default: a stall fails its own step, named, rather than
 * running into the test file's time limit with nothing said.
 */
export const RECEIVER_WAIT_MS = 30_000;

let receivers = 0;

/**
 * A real HTTP receiver of webhooks on 127.0.0.1, recording everything it gets. With `ownPath`, its
 * url ends in a path no other receiver of the process has: for tests sharing one database, where a
 * port an earlier test closed can come back, and with it the same URL (the same url_key), so that
 * deliveries that test left pending went to this one's receiver.
 */
export async function startReceiver(t: Test, answer: (r: Received, n: number) => Answer = () => 200, options: { ownPath?: boolean } = {}): Promise<Receiver> {
  const received: Received[] = [];
  const waiters: Array<{ done: () => boolean; resolve: (r: Received[]) => void }> = [];
  const hanging = new Set<http.ServerResponse>();
  const wait = (done: () => boolean, timeoutMs: number, what: () => string) =>
    new Promise<Received[]>((resolve, reject) => {
      const waiter = {
        done,
        resolve: (r: Received[]) => {
          clearTimeout(timer);
          resolve(r);
        },
      };
      const timer = setTimeout(() => {
        waiters.splice(waiters.indexOf(waiter), 1);
        reject(new Error(`${what()}: never came (waited ${timeoutMs} ms)`));
      }, timeoutMs);
      waiters.push(waiter);
    });
  const receiver: Receiver = {
    url: '',
    received,
    answer,
    count(count, timeoutMs = RECEIVER_WAIT_MS) {
      if (received.length >= count) return Promise.resolve(received.slice());
      return wait(() => received.length >= count, timeoutMs, () => `${count} requests at the receiver (${received.length} came)`);
    },
    waitFor(predicate, timeoutMs = RECEIVER_WAIT_MS, what = `a request matching ${predicate.toString().slice(0, 160)}`) {
      if (received.some(predicate)) return Promise.resolve(received.slice());
      return wait(() => received.some(predicate), timeoutMs, () => `${what} (${received.length} requests came)`);
    },
    async close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      server.close();
      await once(server, 'close').catch(() => {});
    },
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let json: Received['json'];
      try {
        json = JSON.parse(body) as Received['json'];
      } catch {
        json = { id: '', type: '', timestamp: '', data: {} };
      }
      const r: Received = { headers: req.headers, body, json, at: Date.now(), url: req.url ?? '' };
      received.push(r);
      const decided = receiver.answer(r, received.length);
      if (decided === 'hang') hanging.add(res);
      else if (typeof decided === 'object') {
        res.writeHead(decided.status, decided.headers);
        res.end();
      } else {
        res.statusCode = decided;
        if (decided >= 300 && decided < 400) res.setHeader('location', '/elsewhere');
        res.end();
      }
      for (const w of [...waiters]) {
        if (w.done()) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(received.slice());
        }
      }
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}${options.ownPath ? `/r${++receivers}` : ''}`;
  t.teardown(() => receiver.close());
  return receiver;
}
