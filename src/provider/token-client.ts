import { setTimeout as delay } from 'node:timers/promises';
import { Counter, Gauge, Registry } from 'prom-client';
import { backoff } from '../timing/backoff.js';
import type { TokenClientConfig } from '../config/config.js';
import { TokenUnavailableError } from './errors.js';
import { clientAuthentication } from './token-auth.js';
import {
  describeError,
  type IssuedToken,
  processTokenResponse,
  TOKEN_FAILURE_REASONS,
  type TokenEndpoint,
  TokenEndpointError,
  tokenRequest,
} from './token-exchange.js';
import type { BearerTokenSource } from './token-source.js';

// The renewal policy around the token endpoint exchange (token-exchange.ts): renew from the
// token's own exp minus 600 s, one request in flight for all callers, jittered backoff honouring
// Retry-After, and no failure ever cached.

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
/** setTimeout overflows (fires at once) beyond a signed 32-bit millisecond count. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

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

/**
 * Obtains and keeps one bearer token from the provider's authentication platform (client credentials).
 * Renewal follows the token's own `exp`; concurrent callers share one request; failures are not cached.
 */
export class TokenClient implements BearerTokenSource {
  readonly tokenUrl: string;
  private readonly endpoint: TokenEndpoint;
  private readonly log: TokenLog | undefined;
  private readonly now: () => number;
  private readonly sleep: (ms: number, signal: AbortSignal) => Promise<void>;
  private readonly timers: TimerApi;
  private readonly random: () => number;
  private readonly timeoutMs: number;
  private readonly metrics: Metrics;
  private readonly closing = new AbortController();

  private held: HeldToken | undefined;
  private inflight: Promise<HeldToken> | undefined;
  /** Earliest moment for the next proactive (background) refresh. */
  private nextAttemptAt = 0;
  private backgroundFailures = 0;
  /** Token requests failed since the last one that succeeded (its gauge: the alert's "still failing"). */
  private failuresSinceSuccess = 0;
  private timer: unknown;
  private warnedShortLifetime = false;
  private warnedExpiresIn = false;
  /** A caller has been handed this failure streak's hint already (reset by a new token). */
  private hintGiven = false;

  constructor(options: TokenClientOptions) {
    this.tokenUrl = `${options.config.authUrl}/oauth2/token`;
    this.endpoint = { tokenUrl: this.tokenUrl, scope: options.config.scope, auth: clientAuthentication(options.config) };
    this.log = options.log;
    this.now = options.now ?? Date.now;
    this.sleep = options.sleep ?? ((ms, signal) => delay(ms, undefined, { signal }));
    this.timers = options.timers ?? nodeTimers;
    this.random = options.random ?? Math.random;
    this.timeoutMs = options.timeoutMs ?? 5_000;
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
    try {
      return (await this.refresh()).token;
    } catch (err) {
      throw this.forCaller(err);
    }
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

  /** Resolves once no token request is in flight, whether it succeeded or failed. */
  async idle(): Promise<void> {
    while (this.inflight) await this.inflight.catch(() => undefined);
  }

  /** Stops the proactive timer and abandons any retry wait or request in flight. */
  close(): void {
    this.closing.abort(new TokenUnavailableError('the token client is closed'));
    this.clearTimer();
  }

  /**
   * Concurrent callers share one failure; its hint (what the operator should check) goes to the
   * first caller of a failure streak only, so that the logs say it once until a token is obtained.
   */
  private forCaller(err: unknown): unknown {
    if (!(err instanceof TokenEndpointError) || err.hint === undefined) return err;
    if (this.hintGiven) return err.withoutHint();
    this.hintGiven = true;
    return err;
  }

  private refresh(): Promise<HeldToken> {
    this.inflight ??= this.fetchWithRetries()
      .then(
        (held) => this.install(held),
        (err: unknown) => {
          this.renewalFailed(err);
          throw err;
        },
      )
      .finally(() => {
        this.inflight = undefined;
      });
    return this.inflight;
  }

  private refreshInBackground(): void {
    if (this.inflight) return;
    // renewalFailed has dealt with a failure already.
    this.refresh().catch(() => undefined);
  }

  /**
   * Any failed refresh once a token was held, a caller's included: back off and re-arm the timer, so
   * that the renewal goes on without calls, past the token's exp too (until a token comes back).
   */
  private renewalFailed(err: unknown): void {
    const held = this.held;
    if (this.closing.signal.aborted || !held) return;
    this.backgroundFailures += 1;
    const wait = backoff(this.backgroundFailures, MIN_REFRESH_INTERVAL_MS, BACKGROUND_BACKOFF_CAP_MS, this.random);
    const asked = err instanceof TokenEndpointError ? (err.retryAfterMs ?? 0) : 0;
    this.nextAttemptAt = this.now() + Math.max(wait, asked);
    this.log?.warn(
      { err: describeError(err), failures: this.backgroundFailures, nextAttemptAt: new Date(this.nextAttemptAt).toISOString() },
      this.now() < held.serveUntil ? 'token renewal failed; the current token is still served' : 'token renewal failed; no token is served until one is obtained',
    );
    this.schedule();
  }

  private install(held: HeldToken): HeldToken {
    this.held = held;
    this.backgroundFailures = 0;
    this.hintGiven = false;
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

  /**
   * One timer, at the next proactive refresh; past the held token's serving time too, so that a
   * token lost to a failing endpoint is obtained again (and the failures counted) with no call.
   */
  private schedule(): void {
    this.clearTimer();
    if (!this.held || this.closing.signal.aborted) return;
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
        this.failuresSinceSuccess += 1;
        if (this.closing.signal.aborted) throw new TokenUnavailableError('the token client is closed', { cause: err });
        if (!failure?.retryable || attempt >= MAX_ATTEMPTS) throw failure ?? err;
        if ((failure.retryAfterMs ?? 0) > MAX_RETRY_AFTER_MS) throw failure;
        const wait = Math.max(backoff(attempt, BACKOFF_BASE_MS, BACKOFF_CAP_MS, this.random), failure.retryAfterMs ?? 0);
        this.log?.warn({ err: describeError(failure), attempt, retryInMs: Math.round(wait) }, 'token request failed; retrying');
        try {
          await this.sleep(wait, this.closing.signal);
        } catch (abort) {
          throw new TokenUnavailableError('the token client is closed', { cause: abort });
        }
      }
    }
  }

  /** One exchange; any failure is a TokenEndpointError. */
  private async fetchOnce(): Promise<HeldToken> {
    const signal = AbortSignal.any([AbortSignal.timeout(this.timeoutMs), this.closing.signal]);
    const answer = await tokenRequest(this.endpoint, { now: this.now(), signal });
    const now = this.now();
    const issued = processTokenResponse(answer, now);
    this.metrics.requests.inc({ outcome: 'success' });
    this.failuresSinceSuccess = 0;
    this.noteExpiresIn(issued.expiresIn, issued.expiresAt - now);
    return this.timing(issued, now);
  }

  /** Renewal moments, all from the token's own exp. */
  private timing({ accessToken: token, expiresAt }: IssuedToken, now: number): HeldToken {
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

  private createMetrics(registry: Registry): Metrics {
    const requests = new Counter({
      name: 'provider_token_requests_total',
      help: 'HTTP requests to the token endpoint, by outcome',
      labelNames: ['outcome'] as const,
      registers: [registry],
    });
    // Every outcome from the start: increase() counts nothing for a series' first sample, so a first
    // failure (an instance whose first token request fails) would not be an increase.
    for (const outcome of ['success', ...TOKEN_FAILURE_REASONS]) requests.inc({ outcome }, 0);
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
    new Gauge({
      name: 'provider_token_failures_since_success',
      help: 'Token requests failed since the last one that succeeded (0 once one does, and before the first request)',
      registers: [registry],
      collect() {
        this.set(client.failuresSinceSuccess);
      },
    });
    return { requests };
  }
}
