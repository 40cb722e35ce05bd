// What a finished delivery attempt becomes: delivered, retried later, or dead past its horizon.
import { retryDelayS } from './backoff.js';
import type { FinishedAttempt } from './queue-sql.js';

/** The delivery an attempt was for: its lease, when it became eligible, its attempts before this one. */
export interface AttemptedDelivery {
  id: number;
  token: string;
  queuedAt: Date;
  attempts: number;
}

/** What the receiver answered: a status (null when none came), an error unless it was a 2xx, a Retry-After in seconds. */
export interface AttemptAnswer {
  httpStatus: number | null;
  error: string | null;
  retryAfterS?: number | undefined;
}

export interface RetryPolicy {
  /** EVENT_RETRY_HORIZON_S: a delivery with no 2xx this long after it became eligible is dead. */
  horizonS: number;
  /** The instance is stopping: a failed attempt was cut short, not the receiver's doing. */
  stopping: boolean;
  random?: () => number;
}

export type AttemptResult = 'delivered' | 'failed' | 'dead' | 'interrupted';

/** The row a finished attempt writes, and what it was. A pure function of the attempt, its answer, the time and the policy. */
export function attemptOutcome(
  delivery: AttemptedDelivery,
  answer: AttemptAnswer,
  done: Date,
  policy: RetryPolicy,
): { result: AttemptResult; finished: FinishedAttempt } {
  const { id, token } = delivery;
  const { httpStatus, error } = answer;
  if (policy.stopping && error !== null) {
    return { result: 'interrupted', finished: { id, token, status: 'pending', at: done, httpStatus, error: 'interrupted: the instance was stopping', nextAt: done } };
  }
  if (error === null) return { result: 'delivered', finished: { id, token, status: 'delivered', at: done, httpStatus, error: null, nextAt: null } };
  const deadline = delivery.queuedAt.getTime() + policy.horizonS * 1000;
  if (done.getTime() >= deadline) return { result: 'dead', finished: { id, token, status: 'dead', at: done, httpStatus, error, nextAt: null } };
  // Retry-After (429, 503) when the receiver asks for longer than the backoff would wait.
  const delayS = Math.max(retryDelayS(delivery.attempts + 1, policy.random), answer.retryAfterS ?? 0);
  const nextAt = new Date(Math.min(deadline, done.getTime() + delayS * 1000));
  return { result: 'failed', finished: { id, token, status: 'pending', at: done, httpStatus, error, nextAt } };
}

/** Seconds a Retry-After header asks for (a number of seconds or an HTTP date); undefined when unreadable. */
export function parseRetryAfter(value: string | string[] | undefined, now: Date): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (v === undefined || v.trim() === '') return undefined;
  if (/^\d+$/.test(v.trim())) return Number(v.trim());
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, (at - now.getTime()) / 1000);
}
