import { EventEmitter } from 'node:events';
import { defaultTextMapSetter, type Span, SpanKind } from '@opentelemetry/api';
import { Pool } from 'undici';
import {
  TokenUnavailableError,
  UpstreamRejectedError,
  UpstreamUnavailableError,
} from './errors.js';
import { readBounded } from './body.js';
import type { BearerTokenSource } from './token-source.js';
import { type UnderwritingRequest, UNDERWRITINGS_PATH } from './schemas.js';
import { childSpan, endFailed, propagator, type SpanParent } from '../tracing/spans.js';


/** Keep-alive connections to the provider per instance, unless more are asked for. */
export const DEFAULT_PROVIDER_CONNECTIONS = 64;

/**
 * How long an idle connection to the provider is kept (PROVIDER_KEEP_ALIVE_MS's default): below the
 * shortest idle timeout common servers use (5 s: Node, Apache), so the gateway closes an idle
 * connection before the provider does. The other way round, a call written just as the provider
 * closes the connection fails with no answer, and the gateway cannot tell that it was never read.
 */
export const DEFAULT_PROVIDER_KEEP_ALIVE_MS = 4_000;
/** What the provider's reply is cut to before it is stored (never logged). */
export const EXCERPT_MAX_CHARS = 500;
/** Bytes read from a refusal's body at most; the rest is dropped with the connection. */
const EXCERPT_MAX_BYTES = 8 * 1024;

/** How a provider call ended, as the `outcome` label of the upstream duration histogram ("outcome" names metric labels only). */
export type UpstreamMetricOutcome = 'accepted' | 'rejected' | 'unavailable';

export interface UnderwritingClientOptions {
  /** PROVIDER_BASE_URL; may carry a path prefix. Unset: every call fails as unavailable. */
  baseUrl: string | undefined;
  partnerToken: string | undefined;
  timeoutMs: number;
  tokenSource?: BearerTokenSource | undefined;
  /** Keep-alive connections to the provider, at most. */
  connections?: number;
  /** An idle connection is closed after this long (PROVIDER_KEEP_ALIVE_MS); the provider's Keep-Alive hint, when shorter, wins. */
  keepAliveMs?: number;
  /** Called once per HTTP exchange (not for token failures), e.g. to feed a histogram. */
  observe?: (seconds: number, outcome: UpstreamMetricOutcome) => void;
}

export interface SendOptions {
  /** performance.now() past which nothing is sent (the bearer token came too late): TokenUnavailableError. */
  sendBy?: number;
  /** Sent as X-Request-Id: the provider's logs and ours then name the call alike. */
  requestId?: string;
  /** The submit's span (tracing on): the call becomes its client span, whose traceparent is sent. */
  trace?: SpanParent | undefined;
}

export interface UnderwritingClient {
  /**
   * Sends the request as is. Resolves with the provider's 2xx status; rejects with
   * TokenUnavailableError (nothing sent), UpstreamRejectedError (non-2xx, redirects included) or
   * UpstreamUnavailableError (unreachable, reset, timed out).
   */
  submitUnderwriting(body: UnderwritingRequest, options?: SendOptions): Promise<{ status: number }>;
  close(): Promise<void>;
}

export function createUnderwritingClient(options: UnderwritingClientOptions): UnderwritingClient {
  const target = options.baseUrl === undefined ? undefined : new URL(options.baseUrl);
  // undici's Pool follows no redirects: a 3xx comes back as a status, and is a refusal.
  const pool =
    target === undefined
      ? undefined
      : new Pool(target.origin, {
          connections: options.connections ?? DEFAULT_PROVIDER_CONNECTIONS,
          connect: { timeout: options.timeoutMs },
          headersTimeout: options.timeoutMs,
          bodyTimeout: options.timeoutMs,
          keepAliveTimeout: options.keepAliveMs ?? DEFAULT_PROVIDER_KEEP_ALIVE_MS,
        });
  const path = `${target?.pathname.replace(/\/+$/, '') ?? ''}${UNDERWRITINGS_PATH}`;
  const observe = options.observe ?? (() => {});
  // PROVIDER_BASE_URL holds no credentials (config refuses them) and no query: safe as url.full.
  const spanAttributes = target && {
    'http.request.method': 'POST',
    'url.full': `${target.origin}${path}`,
    'server.address': target.hostname,
    'server.port': Number(target.port || (target.protocol === 'https:' ? 443 : 80)),
  };

  /** The provider call as a client span of the submit, its traceparent (and tracestate) in the headers. */
  function clientSpan(parent: SpanParent, headers: Record<string, string>): Span {
    const { span, parent: call } = childSpan(parent, `POST ${UNDERWRITINGS_PATH}`, SpanKind.CLIENT, spanAttributes ?? {});
    propagator.inject(call.context, headers, defaultTextMapSetter);
    return span;
  }

  async function headersFor(): Promise<Record<string, string>> {
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'x-partner-auth': options.partnerToken ?? '',
    };
    if (options.tokenSource) {
      try {
        headers.authorization = `Bearer ${await options.tokenSource.getToken()}`;
      } catch (err) {
        throw err instanceof TokenUnavailableError
          ? err
          : new TokenUnavailableError(err instanceof Error ? err.message : 'token source failed', { cause: err });
      }
    }
    return headers;
  }

  return {
    async submitUnderwriting(body, sendOptions = {}) {
      const headers = await headersFor();
      if (sendOptions.sendBy !== undefined && performance.now() > sendOptions.sendBy) {
        throw new TokenUnavailableError('the bearer token came too late to send the request in time');
      }
      if (pool === undefined) throw new UpstreamUnavailableError('no provider base URL is configured', { notSent: true });
      if (sendOptions.requestId !== undefined) headers['x-request-id'] = sendOptions.requestId;
      const span = sendOptions.trace && clientSpan(sendOptions.trace, headers);
      const started = performance.now();
      const seconds = () => (performance.now() - started) / 1000;
      // The whole exchange, body included, within timeoutMs: a timer, cleared at the end, fires the
      // call's deadline. AbortSignal.timeout showed in the submit's CPU profile (weak refs, GC).
      const signal = new Deadline();
      const timer = setTimeout(expire, options.timeoutMs, signal);
      try {
        let response;
        try {
          response = await pool.request({ path, method: 'POST', headers, body: JSON.stringify(body), signal });
        } catch (err) {
          observe(seconds(), 'unavailable');
          const reason = unreachableReason(err, signal, options.timeoutMs);
          if (span) endFailed(span, signal.aborted ? 'timeout' : ((err as { code?: string } | null)?.code ?? 'unreachable'));
          throw new UpstreamUnavailableError(reason, { cause: err, notSent: neverConnected(err, signal) });
        }
        const status = response.statusCode;
        span?.setAttribute('http.response.status_code', status);
        if (status >= 200 && status < 300) {
          // The provider has accepted; a body that fails to arrive changes nothing about that.
          await response.body.dump().catch(() => {});
          observe(seconds(), 'accepted');
          span?.end();
          return { status };
        }
        if (span) endFailed(span, String(status));
        // Cut to EXCERPT_MAX_CHARS only once scrubbed, so that no secret or CPF is cut in half and kept.
        const excerpt = await readBounded(response.body, EXCERPT_MAX_BYTES, 'truncate').catch(() => '');
        observe(seconds(), 'rejected');
        throw new UpstreamRejectedError(status, excerpt, retryAfterSeconds(response.headers['retry-after']));
      } finally {
        clearTimeout(timer);
      }
    },
    close: async () => {
      await pool?.close();
    },
  };
}

/**
 * undici's `signal` may be an emitter of 'abort' as well as an AbortSignal: one per call costs a
 * small fraction of an AbortController with its listener, which showed in the submit's CPU
 * profile (its EventTarget, and the garbage it leaves).
 */
class Deadline extends EventEmitter {
  aborted = false;
}

function expire(deadline: Deadline): void {
  deadline.aborted = true;
  deadline.emit('abort');
}

/** Why the call produced no answer, in words fit for the stored request (no secrets in it). */
function unreachableReason(err: unknown, signal: Deadline, timeoutMs: number): string {
  const code = (err as { code?: unknown } | null)?.code;
  if (signal.aborted || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT') {
    return `provider did not answer within ${timeoutMs} ms`;
  }
  const message = err instanceof Error ? err.message : String(err);
  return `provider unreachable: ${typeof code === 'string' ? `${code} ` : ''}${message}`.slice(0, EXCERPT_MAX_CHARS);
}

/**
 * Errors that come before a connection exists, so before a byte of the request was written:
 * refused, no such host (or no answer from DNS), unreachable network, the connect timing out.
 * undici opens a new connection for a request when no idle one is free; a reused connection that
 * fails is never one of these.
 */
const BEFORE_CONNECT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ENETUNREACH', 'EHOSTUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

function neverConnected(err: unknown, signal: Deadline): boolean {
  if (signal.aborted) return false;
  let cause: unknown = err;
  // undici may wrap the socket's error; the code is on it or on its cause.
  for (let depth = 0; depth < 3 && cause; depth++) {
    const code = (cause as { code?: unknown }).code;
    if (typeof code === 'string' && BEFORE_CONNECT.has(code)) return true;
    cause = (cause as { cause?: unknown }).cause;
  }
  return false;
}

/** Retry-After as seconds from now: delta-seconds or an HTTP date; undefined when absent or unreadable. */
export function retryAfterSeconds(value: string | string[] | undefined, nowMs = Date.now()): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (text === undefined) return undefined;
  const trimmed = text.trim();
  if (/^[0-9]{1,9}$/.test(trimmed)) return Number(trimmed);
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? undefined : Math.max(0, (at - nowMs) / 1000);
}
