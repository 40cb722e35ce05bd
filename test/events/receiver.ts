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
  /** Resolves once `count` requests in all have arrived. */
  count(count: number): Promise<Received[]>;
  /** Resolves once a request satisfying the predicate has arrived, with everything received until then. */
  waitFor(predicate: (r: Received) => boolean): Promise<Received[]>;
  /** Decides each answer; default 200. */
  answer: (r: Received, n: number) => Answer;
  close(): Promise<void>;
}

/** A real HTTP receiver of webhooks on 127.0.0.1, recording everything it gets. */
export async function startReceiver(t: Test, answer: (r: Received, n: number) => Answer = () => 200): Promise<Receiver> {
  const received: Received[] = [];
  const waiters: Array<{ done: () => boolean; resolve: (r: Received[]) => void }> = [];
  const hanging = new Set<http.ServerResponse>();
  const receiver: Receiver = {
    url: '',
    received,
    answer,
    count(count) {
      if (received.length >= count) return Promise.resolve(received.slice());
      return new Promise((resolve) => waiters.push({ done: () => received.length >= count, resolve }));
    },
    waitFor(predicate) {
      if (received.some(predicate)) return Promise.resolve(received.slice());
      return new Promise((resolve) => waiters.push({ done: () => received.some(predicate), resolve }));
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
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  t.teardown(() => receiver.close());
  return receiver;
}
