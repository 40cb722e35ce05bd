import { EventEmitter, once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { pino } from 'pino';
import type { Test } from 'tap';
import { loggerOptions } from '../../src/observability/logger.js';
import { buildSandboxApp, type SandboxDeps } from '../../src/sandbox/app.js';
import { loadSandboxConfig, type SandboxConfig, SANDBOX_DEFAULT_PARTNER_TOKEN } from '../../src/sandbox/config.js';
import { listen } from '../helpers/app.js';

export const PARTNER_TOKEN = SANDBOX_DEFAULT_PARTNER_TOKEN;
export const UNDERWRITINGS = '/api/partner/credit/cards/underwritings';

export interface WatchedLogs {
  logger: FastifyBaseLogger;
  entries(): Array<Record<string, any>>;
  text(): string;
  /** Resolves with the first entry (past or future) that satisfies the predicate. */
  waitFor(predicate: (entry: Record<string, any>) => boolean): Promise<Record<string, any>>;
}

/** A logger with the production options whose lines a test can await. */
export function watchLogs(): WatchedLogs {
  const lines: Array<Record<string, any>> = [];
  const raw: string[] = [];
  const events = new EventEmitter();
  const logger = pino(loggerOptions('trace'), {
    write: (line: string) => {
      raw.push(line);
      const entry = JSON.parse(line) as Record<string, any>;
      lines.push(entry);
      events.emit('line', entry);
    },
  });
  return {
    logger,
    entries: () => lines,
    text: () => raw.join(''),
    waitFor: (predicate) =>
      new Promise((resolve) => {
        const found = lines.find(predicate);
        if (found) return resolve(found);
        const listener = (entry: Record<string, any>) => {
          if (!predicate(entry)) return;
          events.off('line', listener);
          resolve(entry);
        };
        events.on('line', listener);
      }),
  };
}

export interface RunningSandbox {
  app: FastifyInstance;
  base: string;
  config: Readonly<SandboxConfig>;
  logs: WatchedLogs;
}

/** The simulator with the given SANDBOX_* variables (delay 0 unless given), listening on 127.0.0.1. */
export async function startSandbox(
  t: Test,
  env: Record<string, string> = {},
  deps: Omit<SandboxDeps, 'logger'> = {},
): Promise<RunningSandbox> {
  const config = loadSandboxConfig({ SANDBOX_DELAY_MS: '0', ...env });
  const logs = watchLogs();
  const app = await buildSandboxApp(config, { logger: logs.logger, ...deps });
  t.teardown(() => app.close());
  const base = await listen(app);
  return { app, base, config, logs };
}

export interface Delivery {
  body: any;
  headers: http.IncomingHttpHeaders;
  url: string;
  peer: string | undefined;
}

export interface CallbackReceiver {
  url: string;
  deliveries: Delivery[];
  /** Resolves once `count` deliveries have arrived. */
  received(count: number): Promise<Delivery[]>;
}

/** A real HTTP server on 127.0.0.1:0 standing in for the gateway's callback route. */
export async function callbackReceiver(t: Test, statuses: number[] = []): Promise<CallbackReceiver> {
  const deliveries: Delivery[] = [];
  const events = new EventEmitter();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const status = statuses[deliveries.length] ?? 200;
      deliveries.push({
        body: JSON.parse(Buffer.concat(chunks).toString('utf8')),
        headers: req.headers,
        url: req.url ?? '',
        peer: req.socket.remoteAddress,
      });
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ received: status < 300 }));
      events.emit('delivery');
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1/callbacks/underwriting`,
    deliveries,
    received: async (count) => {
      while (deliveries.length < count) await once(events, 'delivery');
      return deliveries.slice(0, count);
    },
  };
}

/** A valid underwriting request body. */
export function requestBody(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { customerUuid: 'customer-1', cpf: '52998224725', costSavingEnabled: false, ...overrides };
}
