import { AppError } from '../http/errors.js';
import { TokenUnavailableError, UpstreamRejectedError, UpstreamUnavailableError } from '../provider/errors.js';
import type { CallOutcome } from '../provider/sql.js';
import { EXCERPT_MAX_CHARS } from '../provider/underwriting-client.js';
import { scrubText } from '../observability/scrub.js';
import type { SubmitMetricOutcome } from './metrics.js';

// What a failed provider call means: for the caller's answer, for the stored request, for the
// circuit, and whether the provider certainly did not receive it (docs/provider-pacing.md).

export interface Failure {
  error: AppError;
  metricOutcome: SubmitMetricOutcome;
  stored: { upstreamStatus: number | null; error: string };
}

/** Maps a failed provider call to the contract's answer and to what the stored request says. */
export function describeFailure(err: unknown, secrets: Array<string | undefined>): Failure {
  if (err instanceof TokenUnavailableError) {
    return {
      error: new AppError(502, 'upstream_auth_failed', 'no bearer token could be obtained for the provider; nothing was sent'),
      metricOutcome: 'auth_failed',
      stored: { upstreamStatus: null, error: redact(`bearer token unavailable: ${err.message}`, secrets) },
    };
  }
  if (err instanceof UpstreamRejectedError) {
    const { upstreamStatus } = err;
    return {
      error: new AppError(502, 'upstream_rejected', `the provider refused the request (HTTP ${upstreamStatus})`, { upstreamStatus }),
      metricOutcome: 'rejected',
      stored: { upstreamStatus, error: redact(err.bodyExcerpt, secrets) || `provider answered ${upstreamStatus} with no body` },
    };
  }
  const reason = err instanceof UpstreamUnavailableError ? err.message : 'the provider call failed unexpectedly';
  return {
    error: new AppError(504, 'upstream_unavailable', 'the provider could not be reached or did not answer in time'),
    metricOutcome: 'unavailable',
    stored: { upstreamStatus: null, error: redact(reason, secrets) },
  };
}

/** Keeps CPFs (in any separator form or escape) and our own secrets out of what we store from the provider's words. */
function redact(text: string, secrets: Array<string | undefined>): string {
  return scrubText(text, secrets, EXCERPT_MAX_CHARS);
}

/**
 * True only when the provider certainly did not receive the request, so sending it again cannot
 * run a second underwriting: nothing was sent (no bearer token; no connection could be made), or
 * the provider said so (429 Too Many Requests, 503 Service Unavailable). Anything else (a timeout
 * or a reset once connected, another 5xx) may have been received: never sent again.
 */
export function certainlyNotReceived(err: unknown): boolean {
  if (err instanceof TokenUnavailableError) return true;
  if (err instanceof UpstreamUnavailableError) return err.notSent;
  if (err instanceof UpstreamRejectedError) return err.upstreamStatus === 429 || err.upstreamStatus === 503;
  return false;
}

/** What the call tells the circuit: any answer but a 5xx shows a working provider; no answer, a 5xx or no token is a failure. */
export function circuitOutcome(err: unknown): CallOutcome {
  if (err instanceof UpstreamRejectedError) return err.upstreamStatus >= 500 ? 'failed' : 'answered';
  return 'failed';
}

/** The provider's Retry-After on a 429 or 503, or 1 s for a 429 without one: every instance holds back that long. */
export function holdOf(err: unknown): number | null {
  if (!(err instanceof UpstreamRejectedError)) return null;
  if (err.upstreamStatus !== 429 && err.upstreamStatus !== 503) return null;
  return err.retryAfterS ?? (err.upstreamStatus === 429 ? 1 : null);
}
