import { createPrivateKey, type KeyObject, randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { decodeJwt, SignJWT } from 'jose';
import { Counter, Gauge, Registry } from 'prom-client';
import { request } from 'undici';
import type { TokenClientConfig } from '../config.js';
import { readBounded } from './body.js';
import { TokenUnavailableError } from './errors.js';
import type { BearerTokenSource } from './token-source.js';

/** The provider's rule: renew 600 s before the token's own `exp`. */
export const RENEWAL_LEAD_MS = 600_000;
/** Below this much validity left, callers wait for a new token instead of being served the old one. */
const HARD_MARGIN_MS = 30_000;
/** Proactive refreshes never start closer together than this, however short the tokens live. */
const MIN_REFRESH_INTERVAL_MS = 5_000;
const MAX_ATTEMPTS = 3;
const BACKOFF_BASE_MS = 250;
const BACKOFF_CAP_MS = 5_000;
/** A Retry-After longer than this is not waited for inside a caller's request. */
const MAX_RETRY_AFTER_MS = 10_000;
const BACKGROUND_BACKOFF_CAP_MS = 60_000;
const MAX_RESPONSE_BYTES = 64 * 1024;
/** setTimeout overflows (fires at once) beyond a signed 32-bit millisecond count. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

export const MISSING_TOKEN_MESSAGE =
  "the token endpoint answered without an access_token: check the signed JWT's content, its signature and the service account's permissions";

export type TokenFailureReason = 'rejected' | 'unavailable' | 'invalid_response' | 'missing_access_token';

/** Why a token could not be obtained; never carries a secret or a token. */
export class TokenEndpointError extends TokenUnavailableError {
  constructor(
    readonly reason: TokenFailureReason,
    message: string,
    readonly upstreamStatus?: number,
    /** Milliseconds the endpoint asked us to wait (Retry-After), when it did. */
    readonly retryAfterMs?: number,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'TokenEndpointError';
  }

  get retryable(): boolean {
    return this.reason === 'unavailable';
  }
}

/** The part of a pino logger the client uses. */
export interface TokenLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/** Timers for proactive refresh; tests inject fake ones driven by their clock. */
export interface TimerApi {
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

export interface TokenClientOptions {
  config: TokenClientConfig;
  registry?: Registry;
  log?: TokenLog;
  /** Milliseconds since the epoch. */
  now?: () => number;
  /** Waits between attempts; rejects when the signal aborts. */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  timers?: TimerApi;
  /** In [0, 1); jitter source. */
  random?: () => number;
  /** Timeout of one HTTP attempt. */
  timeoutMs?: number;
}

export interface TokenStatus {
  expiresAt: Date;
  renewAt: Date;
  /** Validity left at the time of asking, in seconds. */
  secondsLeft: number;
  /** The token lives less than the renewal lead, so it is renewed at half its remaining life. */
  shortLifetime: boolean;
}

interface HeldToken {
  token: string;
  /** From the token's `exp`, in ms. */
  expiresAt: number;
  renewAt: number;
  /** After this, callers wait for a new token. */
  serveUntil: number;
  shortLifetime: boolean;
}

interface Metrics {
  requests: Counter<'outcome'>;
}

const nodeTimers: TimerApi = {
  set: (fn, ms) => setTimeout(fn, ms).unref(),
  clear: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** application/x-www-form-urlencoded encoding of one value, as RFC 6749 §2.3.1 requires for Basic. */
export function formEncode(value: string): string {
  return new URLSearchParams([['', value]]).toString().slice(1);
}

/** Retry-After as delta-seconds or an HTTP date, in ms from `now`; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | string[] | undefined, now: number): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (text === undefined || text.trim() === '') return undefined;
  if (/^\s*\d+\s*$/.test(text)) return Number(text) * 1000;
  const date = Date.parse(text);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

function signingAlgorithm(key: KeyObject): 'RS256' | 'ES256' {
  if (key.asymmetricKeyType === 'rsa') return 'RS256';
  if (key.asymmetricKeyType === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'prime256v1') return 'ES256';
  throw new Error('CLIENT_ASSERTION_KEY must be an RSA or a P-256 EC private key');
}

/**
 * Obtains and keeps one bearer token from the provider's authentication platform (client credentials).
 * Renewal follows the token's own `exp`; concurrent callers share one request; failures are not cached.
 */
export class TokenClient implements BearerTokenSource {
  readonly tokenUrl: string;
  private readonly config: TokenClientConfig;
  private readonly log: TokenLog | undefined;
  private readonly now: () => number;
  private readonly sleep: (ms: number, signal: AbortSignal) => Promise<void>;
  private readonly timers: TimerApi;
  private readonly random: () => number;
  private readonly timeoutMs: number;
  private readonly assertion: { key: KeyObject; alg: 'RS256' | 'ES256' } | undefined;
  private readonly metrics: Metrics;
  private readonly closing = new AbortController();

  private held: HeldToken | undefined;
  private inflight: Promise<HeldToken> | undefined;
  /** Earliest moment for the next proactive (background) refresh. */
  private nextAttemptAt = 0;
  private backgroundFailures = 0;
  private timer: unknown;
  private warnedShortLifetime = false;
  private warnedExpiresIn = false;

  constructor(options: TokenClientOptions) {
    this.config = options.config;
    this.tokenUrl = `${options.config.authUrl}/oauth2/token`;
    this.log = options.log;
    this.now = options.now ?? Date.now;
    this.sleep = options.sleep ?? ((ms, signal) => delay(ms, undefined, { signal }));
    this.timers = options.timers ?? nodeTimers;
    this.random = options.random ?? Math.random;
    this.timeoutMs = options.timeoutMs ?? 5_000;
    if (options.config.assertionKey !== undefined) {
      const key = createPrivateKey({ key: options.config.assertionKey, format: 'pem' });
      this.assertion = { key, alg: signingAlgorithm(key) };
    } else if (options.config.clientSecret === undefined) {
      throw new Error('the token client needs a client secret or a client assertion key');
    }
    this.metrics = this.createMetrics(options.registry ?? new Registry());
  }

  async getToken(): Promise<string> {
    if (this.closing.signal.aborted) throw new TokenUnavailableError('the token client is closed');
    const now = this.now();
    const held = this.held;
    if (held && now < held.serveUntil) {
      if (now >= held.renewAt && now >= this.nextAttemptAt) this.refreshInBackground();
      return held.token;
    }
    return (await this.refresh()).token;
  }

  /** The current token's timing, or undefined before the first token. Never the token itself. */
  status(): TokenStatus | undefined {
    const held = this.held;
    if (!held) return undefined;
    return {
      expiresAt: new Date(held.expiresAt),
      renewAt: new Date(held.renewAt),
      secondsLeft: Math.round((held.expiresAt - this.now()) / 1000),
      shortLifetime: held.shortLifetime,
    };
  }

  /** Resolves once no token request is in flight (whatever its outcome). */
  async idle(): Promise<void> {
    while (this.inflight) await this.inflight.catch(() => undefined);
  }

  /** Stops the proactive timer and abandons any retry wait or request in flight. */
  close(): void {
    this.closing.abort(new TokenUnavailableError('the token client is closed'));
    this.clearTimer();
  }

  private refresh(): Promise<HeldToken> {
    this.inflight ??= this.fetchWithRetries()
      .then((held) => this.install(held))
      .finally(() => {
        this.inflight = undefined;
      });
    return this.inflight;
  }

  private refreshInBackground(): void {
    if (this.inflight) return;
    this.refresh().catch((err: unknown) => this.backgroundFailed(err));
  }

  private backgroundFailed(err: unknown): void {
    if (this.closing.signal.aborted) return;
    this.backgroundFailures += 1;
    const backoff = Math.min(MIN_REFRESH_INTERVAL_MS * 2 ** (this.backgroundFailures - 1), BACKGROUND_BACKOFF_CAP_MS);
    const asked = err instanceof TokenEndpointError ? (err.retryAfterMs ?? 0) : 0;
    this.nextAttemptAt = this.now() + Math.max(this.jitter(backoff), asked);
    this.log?.warn(
      { err: describe(err), failures: this.backgroundFailures, nextAttemptAt: new Date(this.nextAttemptAt).toISOString() },
      'token renewal failed; the current token is still served',
    );
    this.schedule();
  }

  private install(held: HeldToken): HeldToken {
    this.held = held;
    this.backgroundFailures = 0;
    this.nextAttemptAt = held.renewAt;
    this.log?.info(
      {
        expiresAt: new Date(held.expiresAt).toISOString(),
        renewAt: new Date(held.renewAt).toISOString(),
        shortLifetime: held.shortLifetime,
      },
      'provider token obtained',
    );
    this.schedule();
    return held;
  }

  /** One timer, at the next proactive refresh, as long as the held token can still be served. */
  private schedule(): void {
    this.clearTimer();
    const held = this.held;
    if (!held || this.closing.signal.aborted || this.nextAttemptAt >= held.serveUntil) return;
    const wait = Math.min(Math.max(0, this.nextAttemptAt - this.now()), MAX_TIMER_MS);
    this.timer = this.timers.set(() => this.onTimer(), wait);
  }

  private onTimer(): void {
    this.timer = undefined;
    // A clamped timer can fire before its moment: look again rather than refresh early.
    if (this.now() < this.nextAttemptAt) return this.schedule();
    this.refreshInBackground();
  }

  private clearTimer(): void {
    if (this.timer !== undefined) this.timers.clear(this.timer);
    this.timer = undefined;
  }

  private async fetchWithRetries(): Promise<HeldToken> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.fetchOnce();
      } catch (err) {
        const failure = err instanceof TokenEndpointError ? err : undefined;
        const outcome = failure?.reason ?? 'unavailable';
        this.metrics.requests.inc({ outcome });
        if (this.closing.signal.aborted) throw new TokenUnavailableError('the token client is closed', { cause: err });
        if (!failure?.retryable || attempt >= MAX_ATTEMPTS) throw failure ?? err;
        if ((failure.retryAfterMs ?? 0) > MAX_RETRY_AFTER_MS) throw failure;
        const backoff = this.jitter(Math.min(BACKOFF_BASE_MS * 2 ** (attempt - 1), BACKOFF_CAP_MS));
        const wait = Math.max(backoff, failure.retryAfterMs ?? 0);
        this.log?.warn({ err: describe(failure), attempt, retryInMs: Math.round(wait) }, 'token request failed; retrying');
        try {
          await this.sleep(wait, this.closing.signal);
        } catch (abort) {
          throw new TokenUnavailableError('the token client is closed', { cause: abort });
        }
      }
    }
  }

  /** One HTTP attempt; any failure is a TokenEndpointError. */
  private async fetchOnce(): Promise<HeldToken> {
    const { headers, body } = await this.requestParts();
    let response;
    try {
      response = await request(this.tokenUrl, {
        method: 'POST',
        headers,
        body,
        signal: AbortSignal.any([AbortSignal.timeout(this.timeoutMs), this.closing.signal]),
      });
    } catch (err) {
      throw new TokenEndpointError('unavailable', `token endpoint unreachable: ${describe(err).message}`, undefined, undefined, {
        cause: err,
      });
    }
    const status = response.statusCode;
    let text: string;
    try {
      text = await readBounded(response.body, MAX_RESPONSE_BYTES, 'throw');
    } catch (err) {
      throw new TokenEndpointError('unavailable', `token endpoint answer could not be read: ${describe(err).message}`, status);
    }
    if (status === 429 || status >= 500) {
      const retryAfter = parseRetryAfter(response.headers['retry-after'], this.now());
      throw new TokenEndpointError('unavailable', `token endpoint answered ${status}`, status, retryAfter);
    }
    if (status < 200 || status >= 300) {
      const code = oauthErrorCode(text);
      const hint = status === 401 || status === 400 || status === 403 ? ': check CLIENT_ID, the client credentials and TOKEN_SCOPE' : '';
      throw new TokenEndpointError('rejected', `token endpoint answered ${status}${code ? ` (${code})` : ''}${hint}`, status);
    }
    return this.readToken(text, status);
  }

  private readToken(text: string, status: number): HeldToken {
    let answer: unknown;
    try {
      answer = JSON.parse(text);
    } catch {
      throw new TokenEndpointError('invalid_response', 'token endpoint answer is not JSON', status);
    }
    const fields = typeof answer === 'object' && answer !== null ? (answer as Record<string, unknown>) : {};
    const token = fields.access_token;
    if (typeof token !== 'string' || token === '') throw new TokenEndpointError('missing_access_token', MISSING_TOKEN_MESSAGE, status);
    if (typeof fields.token_type === 'string' && fields.token_type.toLowerCase() !== 'bearer') {
      throw new TokenEndpointError('invalid_response', `token endpoint issued a ${fields.token_type.slice(0, 20)} token, not Bearer`, status);
    }
    let exp: unknown;
    try {
      exp = decodeJwt(token).exp;
    } catch {
      throw new TokenEndpointError('invalid_response', 'the access_token is not a JWT', status);
    }
    if (typeof exp !== 'number' || !Number.isFinite(exp)) {
      throw new TokenEndpointError('invalid_response', 'the access_token has no numeric exp claim', status);
    }
    const now = this.now();
    const expiresAt = exp * 1000;
    if (expiresAt <= now) {
      throw new TokenEndpointError('invalid_response', `the access_token expired at ${new Date(expiresAt).toISOString()} (clock skew?)`, status);
    }
    this.metrics.requests.inc({ outcome: 'success' });
    this.noteExpiresIn(fields.expires_in, expiresAt - now);
    return this.timing(token, expiresAt, now);
  }

  /** Renewal moments, all from the token's own exp. */
  private timing(token: string, expiresAt: number, now: number): HeldToken {
    const left = expiresAt - now;
    const serveUntil = expiresAt - Math.min(HARD_MARGIN_MS, left / 4);
    const regular = expiresAt - RENEWAL_LEAD_MS;
    if (regular >= now + MIN_REFRESH_INTERVAL_MS) return { token, expiresAt, renewAt: regular, serveUntil, shortLifetime: false };
    // Lives shorter than the lead: renewing at exp - 600 s would mean a request per call.
    if (!this.warnedShortLifetime) {
      this.warnedShortLifetime = true;
      this.log?.warn(
        { lifetimeSeconds: Math.round(left / 1000), leadSeconds: RENEWAL_LEAD_MS / 1000 },
        'provider token lives shorter than the renewal lead; renewing at half its remaining lifetime',
      );
    }
    const renewAt = Math.min(now + Math.max(MIN_REFRESH_INTERVAL_MS, left / 2), serveUntil);
    return { token, expiresAt, renewAt, serveUntil, shortLifetime: true };
  }

  private noteExpiresIn(expiresIn: unknown, left: number): void {
    if (typeof expiresIn !== 'number' || this.warnedExpiresIn) return;
    if (Math.abs(expiresIn * 1000 - left) <= 60_000) return;
    this.warnedExpiresIn = true;
    this.log?.warn(
      { expiresIn, expSecondsLeft: Math.round(left / 1000) },
      "token endpoint's expires_in disagrees with the token's exp; renewal follows exp",
    );
  }

  private async requestParts(): Promise<{ headers: Record<string, string>; body: string }> {
    const form = new URLSearchParams({ grant_type: 'client_credentials', scope: this.config.scope });
    const headers: Record<string, string> = {
      'content-type': 'application/x-www-form-urlencoded',
      accept: 'application/json',
    };
    if (this.assertion) {
      // RFC 7523 §2.2: the client authenticates with a signed JWT instead of a secret.
      form.set('client_id', this.config.clientId);
      form.set('client_assertion_type', 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer');
      form.set('client_assertion', await this.signAssertion());
    } else {
      const user = formEncode(this.config.clientId);
      const password = formEncode(this.config.clientSecret ?? '');
      headers.authorization = `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
    }
    return { headers, body: form.toString() };
  }

  private async signAssertion(): Promise<string> {
    const { key, alg } = this.assertion!;
    const iat = Math.floor(this.now() / 1000);
    return new SignJWT({})
      .setProtectedHeader({ alg, typ: 'JWT' })
      .setIssuer(this.config.clientId)
      .setSubject(this.config.clientId)
      .setAudience(this.tokenUrl)
      .setJti(randomUUID())
      .setIssuedAt(iat)
      .setExpirationTime(iat + 60)
      .sign(key);
  }

  private jitter(ms: number): number {
    return ms / 2 + (this.random() * ms) / 2;
  }

  private createMetrics(registry: Registry): Metrics {
    const requests = new Counter({
      name: 'provider_token_requests_total',
      help: 'HTTP requests to the token endpoint, by outcome',
      labelNames: ['outcome'] as const,
      registers: [registry],
    });
    const client = this;
    new Gauge({
      name: 'provider_token_expiry_seconds',
      help: "Seconds until the current provider token's exp (0 before the first token)",
      registers: [registry],
      collect() {
        const held = client.held;
        this.set(held ? Math.max(0, (held.expiresAt - client.now()) / 1000) : 0);
      },
    });
    return { requests };
  }
}

/** Only the OAuth error code, never the description or the body: they may echo what we sent. */
function oauthErrorCode(text: string): string | undefined {
  try {
    const code = (JSON.parse(text) as { error?: unknown }).error;
    return typeof code === 'string' && /^[\x20-\x7e]{1,64}$/.test(code) ? code : undefined;
  } catch {
    return undefined;
  }
}

function describe(err: unknown): { name: string; message: string } {
  if (err instanceof Error) return { name: err.name, message: err.message };
  return { name: 'Error', message: String(err) };
}
