import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { SignJWT } from 'jose';
import type { Test } from 'tap';
import type { TimerApi } from '../../src/provider/token-client.js';

export interface RecordedTokenRequest {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  form: URLSearchParams;
}

export interface Reply {
  status: number;
  headers?: Record<string, string>;
  /** An object is sent as JSON. */
  body?: unknown;
  /** Destroy the socket instead of answering. */
  hangUp?: boolean;
  /** Never answer. */
  silent?: boolean;
}

export interface TokenServer {
  /** Use as AUTH_URL: `${authUrl}/oauth2/token` is the token endpoint. */
  authUrl: string;
  requests: RecordedTokenRequest[];
  /** Answers for the next requests, in order; when empty, a fresh token is issued. */
  replies: Reply[];
  /** Lifetime of issued tokens, from the server's clock. */
  lifetimeS: number;
  /** What the token response claims as expires_in (default: lifetimeS). */
  expiresIn: number | undefined;
  /** Every token issued, in order. */
  issued: string[];
  /** A fresh token response body. */
  tokenBody(): Promise<Record<string, unknown>>;
}

/** A real OAuth token endpoint on 127.0.0.1, issuing HS256 JWTs whose exp follows the given clock. */
export async function startTokenServer(t: Test, now: () => number = Date.now): Promise<TokenServer> {
  const key = randomBytes(32);
  const server: TokenServer = {
    authUrl: '',
    requests: [],
    replies: [],
    lifetimeS: 3600,
    expiresIn: undefined,
    issued: [],
    async tokenBody() {
      const iat = Math.floor(now() / 1000);
      const token = await new SignJWT({ scope: 'sdk-kyc' })
        .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
        .setIssuedAt(iat)
        .setExpirationTime(iat + server.lifetimeS)
        .setJti(randomBytes(8).toString('hex'))
        .sign(key);
      server.issued.push(token);
      return { access_token: token, token_type: 'Bearer', expires_in: server.expiresIn ?? server.lifetimeS };
    },
  };
  const http_ = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      server.requests.push({
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        form: new URLSearchParams(Buffer.concat(chunks).toString('utf8')),
      });
      void answer(server.replies.shift(), res);
    });
  });
  async function answer(reply: Reply | undefined, res: http.ServerResponse): Promise<void> {
    if (reply?.silent) return;
    if (reply?.hangUp) return void res.socket?.destroy();
    const status = reply?.status ?? 200;
    const body = reply ? reply.body : await server.tokenBody();
    const text = body === undefined ? '' : typeof body === 'string' ? body : JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', ...reply?.headers });
    res.end(text);
  }
  await new Promise<void>((resolve) => http_.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    http_.closeAllConnections();
    return new Promise<void>((resolve) => http_.close(() => resolve()));
  });
  server.authUrl = `http://127.0.0.1:${(http_.address() as AddressInfo).port}`;
  return server;
}

/** A settable clock with timers that fire only when the test moves time, and a sleep that moves it. */
export class FakeTime {
  private pending: Array<{ id: number; due: number; fn: () => void; ms: number }> = [];
  private nextId = 1;
  /** Every delay the client slept, in ms. */
  readonly sleeps: number[] = [];
  /** Every delay a timer was set for, in ms. */
  readonly timerDelays: number[] = [];

  constructor(public ms: number = Date.UTC(2026, 0, 1)) {}

  now = (): number => this.ms;

  sleep = async (ms: number): Promise<void> => {
    this.sleeps.push(ms);
    this.ms += ms;
  };

  timers: TimerApi = {
    set: (fn, ms) => {
      const id = this.nextId++;
      this.timerDelays.push(ms);
      this.pending.push({ id, due: this.ms + ms, fn, ms });
      return id;
    },
    clear: (handle) => {
      this.pending = this.pending.filter((p) => p.id !== handle);
    },
  };

  /** Timers that fire only when asked: for "no proactive refresh" scenarios. */
  inertTimers: TimerApi = { set: () => 0, clear: () => {} };

  get pendingDue(): number[] {
    return this.pending.map((p) => p.due);
  }

  /** Moves time forward, firing due timers in order, awaiting `settle` after each. */
  async advance(ms: number, settle: () => Promise<void> = async () => {}): Promise<void> {
    const target = this.ms + ms;
    for (;;) {
      const next = this.pending.filter((p) => p.due <= target).sort((a, b) => a.due - b.due)[0];
      if (!next) break;
      this.pending = this.pending.filter((p) => p !== next);
      this.ms = Math.max(this.ms, next.due);
      next.fn();
      await settle();
    }
    this.ms = target;
  }

  /** Moves time without firing anything, as if no timer existed. */
  jump(ms: number): void {
    this.ms += ms;
  }
}
