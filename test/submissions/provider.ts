import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Test } from 'tap';

export interface ReceivedRequest {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  /** The raw body, exactly as it arrived. */
  text: string;
}

export type ProviderHandler = (received: ReceivedRequest, res: http.ServerResponse) => void | Promise<void>;

export interface FakeProvider {
  url: string;
  received: ReceivedRequest[];
  /** TCP connections accepted so far. */
  connections(): number;
  /** Resolves once n requests have arrived. */
  waitForRequests(n: number): Promise<void>;
  setHandler(handler: ProviderHandler): void;
}

/** Accepts everything with 202, as the sandbox does. */
export const accept: ProviderHandler = (_received, res) => {
  res.writeHead(202, { 'content-type': 'application/json' }).end('{"status":"accepted"}');
};

/**
 * A real HTTP server standing in for the provider: records every request it receives and answers
 * with the handler. Every connection (a hanging one included) is dropped at teardown.
 */
export async function startFakeProvider(t: Test, handler: ProviderHandler = accept): Promise<FakeProvider> {
  const received: ReceivedRequest[] = [];
  const waiters: Array<{ n: number; resolve: () => void }> = [];
  let current = handler;
  let connections = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const entry = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, text: Buffer.concat(chunks).toString('utf8') };
      received.push(entry);
      for (const w of [...waiters]) {
        if (received.length >= w.n) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve();
        }
      }
      void Promise.resolve(current(entry, res)).catch((err: unknown) => {
        res.destroy(err instanceof Error ? err : undefined);
      });
    });
  });
  server.on('connection', () => void connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received,
    connections: () => connections,
    waitForRequests: (n) =>
      received.length >= n ? Promise.resolve() : new Promise<void>((resolve) => waiters.push({ n, resolve })),
    setHandler: (h) => void (current = h),
  };
}
