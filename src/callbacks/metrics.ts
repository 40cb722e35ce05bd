import type { Registry } from 'prom-client';
import { histogram, outcomeCounter } from '../observability/metrics.js';

export const CALLBACK_METRIC_OUTCOMES = [
  'matched',
  'duplicate',
  'unmatched',
  'invalid',
  /** 401 or 403: not stored. */
  'refused',
  /** 413: not stored. */
  'too_large',
  /** 503, the database was down: not stored, and the provider may never send it again. */
  'unavailable',
  /** Any other 5xx. */
  'failed',
] as const;
export type CallbackMetricOutcome = (typeof CALLBACK_METRIC_OUTCOMES)[number];

export interface CallbackMetrics {
  count(outcome: CallbackMetricOutcome): void;
  /** Seconds from our submit to the provider's answer, for a matched callback. */
  turnaround(seconds: number): void;
  /** Valid results written by one statement and commit. */
  batch(size: number): void;
}

export function callbackMetrics(registry: Registry): CallbackMetrics {
  const callbacks = outcomeCounter(
    registry,
    'underwriting_callbacks_total',
    'Provider callbacks received, by outcome; refused, too_large, unavailable and failed ones are not stored',
  );
  // Every outcome is exported from the start, so an alert on a rate never starts from "no data".
  for (const outcome of CALLBACK_METRIC_OUTCOMES) callbacks.inc({ outcome }, 0);
  const turnaround = histogram(
    registry,
    'underwriting_callback_turnaround_seconds',
    'Time from the request being submitted to its result callback arriving',
    [1, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400],
  );
  const batches = histogram(
    registry,
    'underwriting_callback_batch_size',
    'Valid callbacks stored per statement and commit (callbacks arriving during a write share the next one)',
    [1, 2, 4, 8, 16, 32, 64],
  );
  return {
    count: (outcome) => callbacks.inc({ outcome }),
    turnaround: (seconds) => turnaround.observe(Math.max(0, seconds)),
    batch: (size) => batches.observe(size),
  };
}
