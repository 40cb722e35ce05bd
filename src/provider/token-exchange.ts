import { decodeJwt } from 'jose';
import { request } from 'undici';
import { readBounded } from './body.js';
import { TokenUnavailableError } from './errors.js';
import type { ClientAuthentication } from './token-auth.js';

// One client-credentials exchange with the token endpoint, as a request/process pair: the request
// builds and sends one POST, the processing turns its answer into a token or a TokenEndpointError.
// Retries, caching and renewal are the caller's (token-client.ts).

const MAX_RESPONSE_BYTES = 64 * 1024;

/** What the provider says a token response without an access_token means. */
export const MISSING_TOKEN_HINT = "check the signed JWT's content, its signature and the service account's permissions";
export const MISSING_TOKEN_MESSAGE = `the token endpoint answered without an access_token: ${MISSING_TOKEN_HINT}`;
const CREDENTIALS_HINT = 'check CLIENT_ID, the client credentials and TOKEN_SCOPE';

export const TOKEN_FAILURE_REASONS = ['rejected', 'unavailable', 'invalid_response', 'missing_access_token'] as const;
export type TokenFailureReason = (typeof TOKEN_FAILURE_REASONS)[number];

/** Why a token could not be obtained; never carries a secret or a token. */
export class TokenEndpointError extends TokenUnavailableError {
  constructor(
    readonly reason: TokenFailureReason,
    message: string,
    readonly upstreamStatus?: number,
    /** Milliseconds the endpoint asked us to wait (Retry-After), when it did. */
    readonly retryAfterMs?: number,
    options?: ErrorOptions & { hint?: string | undefined },
  ) {
    super(message, options);
    this.name = 'TokenEndpointError';
  }

  get retryable(): boolean {
    return this.reason === 'unavailable';
  }

  /** The same failure without its hint, for the callers after the first one of a failure streak. */
  withoutHint(): TokenEndpointError {
    return new TokenEndpointError(this.reason, this.message, this.upstreamStatus, this.retryAfterMs, { cause: this });
  }
}

export interface TokenEndpoint {
  /** `${AUTH_URL}/oauth2/token`. */
  tokenUrl: string;
  scope: string;
  auth: ClientAuthentication;
}

/** The endpoint's answer as received, its body read within bounds. */
export interface TokenEndpointAnswer {
  status: number;
  retryAfter: string | string[] | undefined;
  text: string;
}

/** A token the endpoint issued, read but not yet judged by any renewal policy. */
export interface IssuedToken {
  accessToken: string;
  /** From the token's own `exp`, in ms since the epoch. */
  expiresAt: number;
  /** What the answer claimed as expires_in, as sent (only ever compared, never trusted). */
  expiresIn: unknown;
}

/** Builds and sends one client-credentials request; only an unreachable endpoint or an unreadable answer throws. */
export async function tokenRequest(
  endpoint: TokenEndpoint,
  attempt: { now: number; signal: AbortSignal },
): Promise<TokenEndpointAnswer> {
  const form = new URLSearchParams({ grant_type: 'client_credentials', scope: endpoint.scope });
  const headers: Record<string, string> = {
    'content-type': 'application/x-www-form-urlencoded',
    accept: 'application/json',
  };
  await endpoint.auth.apply({ form, headers }, { tokenUrl: endpoint.tokenUrl, now: attempt.now });
  let response;
  try {
    // undici's request follows no redirects: a 3xx is a refusal, and the credentials go nowhere else.
    response = await request(endpoint.tokenUrl, { method: 'POST', headers, body: form.toString(), signal: attempt.signal });
  } catch (err) {
    throw new TokenEndpointError('unavailable', `token endpoint unreachable: ${describeError(err).message}`, undefined, undefined, {
      cause: err,
    });
  }
  const status = response.statusCode;
  try {
    const text = await readBounded(response.body, MAX_RESPONSE_BYTES, 'throw');
    return { status, retryAfter: response.headers['retry-after'], text };
  } catch (err) {
    throw new TokenEndpointError('unavailable', `token endpoint answer could not be read: ${describeError(err).message}`, status);
  }
}

/** Judges one answer: the issued token, or a TokenEndpointError saying why not (retryable or not). */
export function processTokenResponse(answer: TokenEndpointAnswer, now: number): IssuedToken {
  const { status, text } = answer;
  if (status === 429 || status >= 500) {
    throw new TokenEndpointError('unavailable', `token endpoint answered ${status}`, status, parseRetryAfter(answer.retryAfter, now));
  }
  if (status < 200 || status >= 300) {
    const code = oauthErrorCode(text);
    const hint = status === 401 || status === 400 || status === 403 ? CREDENTIALS_HINT : undefined;
    const message = `token endpoint answered ${status}${code ? ` (${code})` : ''}${hint ? `: ${hint}` : ''}`;
    throw new TokenEndpointError('rejected', message, status, undefined, { hint });
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new TokenEndpointError('invalid_response', 'token endpoint answer is not JSON', status);
  }
  const fields = typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>) : {};
  const token = fields.access_token;
  if (typeof token !== 'string' || token === '') {
    throw new TokenEndpointError('missing_access_token', MISSING_TOKEN_MESSAGE, status, undefined, { hint: MISSING_TOKEN_HINT });
  }
  if (typeof fields.token_type === 'string' && fields.token_type.toLowerCase() !== 'bearer') {
    throw new TokenEndpointError('invalid_response', `token endpoint issued a ${fields.token_type.slice(0, 20)} token, not Bearer`, status);
  }
  // We are not the token's audience: only exp is read, the signature is not checked.
  let exp: unknown;
  try {
    exp = decodeJwt(token).exp;
  } catch {
    throw new TokenEndpointError('invalid_response', 'the access_token is not a JWT', status);
  }
  if (typeof exp !== 'number' || !Number.isFinite(exp)) {
    throw new TokenEndpointError('invalid_response', 'the access_token has no numeric exp claim', status);
  }
  const expiresAt = exp * 1000;
  if (expiresAt <= now) {
    throw new TokenEndpointError('invalid_response', `the access_token expired at ${new Date(expiresAt).toISOString()} (clock skew?)`, status);
  }
  return { accessToken: token, expiresAt, expiresIn: fields.expires_in };
}

/** Retry-After as delta-seconds or an HTTP date, in ms from `now`; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | string[] | undefined, now: number): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (text === undefined || text.trim() === '') return undefined;
  if (/^\s*\d+\s*$/.test(text)) return Number(text) * 1000;
  const date = Date.parse(text);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
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

export function describeError(err: unknown): { name: string; message: string } {
  if (err instanceof Error) return { name: err.name, message: err.message };
  return { name: 'Error', message: String(err) };
}
