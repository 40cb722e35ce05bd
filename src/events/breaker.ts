// An endpoint that keeps failing is probed, not flooded: while its attempts fail, it is sent one
// attempt a second (with every instance together, through its rate slots) instead of every event
// and retry due. What it is not sent waits (its events stay past its position in the feed, its
// retries stay pending), so nothing is lost; the first 2xx opens it to its own rate again.
// Without this a down endpoint costs the others: at 500 events a second it is sent 500 attempts
// a second that fail at once, each written, each retried (bench --delivery-endpoints=troubled).

import type { EndpointTarget } from './endpoints/registry.js';

/** Consecutive failed attempts (this instance) after which an endpoint is probed only. */
export const TRIP_AFTER_FAILURES = 5;
/** Failing this long (any instance: failing_since) also makes it probed only. */
export const TRIP_AFTER_MS = 5_000;
/** Attempts a second to an endpoint probed only, every instance together. */
export const PROBES_PER_S = 1;

export interface EndpointBreaker {
  /** The rate an endpoint is sent at now: its own rateLimitPerS, or PROBES_PER_S while it is probed only (null: none). */
  rateOf(target: Pick<EndpointTarget, 'key' | 'rateLimitPerS' | 'failingSince'>, nowMs: number): number | null;
  /** An attempt to it ended: a 2xx (ok) or not. */
  record(key: string, ok: boolean): void;
}

export function endpointBreaker(): EndpointBreaker {
  const failures = new Map<string, number>();
  const probedOnly = (target: Pick<EndpointTarget, 'key' | 'failingSince'>, nowMs: number) =>
    (failures.get(target.key) ?? 0) >= TRIP_AFTER_FAILURES || (target.failingSince !== null && nowMs - target.failingSince.getTime() >= TRIP_AFTER_MS);
  return {
    rateOf(target, nowMs) {
      if (!probedOnly(target, nowMs)) return target.rateLimitPerS;
      return Math.min(target.rateLimitPerS ?? PROBES_PER_S, PROBES_PER_S);
    },
    record(key, ok) {
      if (ok) failures.delete(key);
      else failures.set(key, (failures.get(key) ?? 0) + 1);
    },
  };
}
