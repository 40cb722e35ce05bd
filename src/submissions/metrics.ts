import { Histogram, type Registry } from 'prom-client';
import { outcomeCounter } from '../observability/metrics.js';
import type { UpstreamMetricOutcome } from '../provider/underwriting-client.js';

/** How one queued submit's forward ended (counted by underwriting_forwards_total). */
export type ForwardOutcome = 'submitted' | 'requeued' | 'cancelled' | 'submit_failed';

/** How a submit was answered, as the `outcome` label of underwriting_submissions_total. */
export type SubmitMetricOutcome =
  | 'submitted'
  | 'queued'
  | 'paced'
  | 'rejected'
  | 'unavailable'
  | 'auth_failed'
  | 'in_flight'
  | 'idempotent_replay'
  | 'idempotency_key_reused'
  | 'invalid'
  | 'forbidden'
  | 'too_large'
  | 'storage_unavailable'
  | 'error';

export interface SubmitMetrics {
  answered(outcome: SubmitMetricOutcome): void;
  upstream(seconds: number, outcome: UpstreamMetricOutcome): void;
  forwarded(outcome: ForwardOutcome): void;
}

export function submitMetrics(registry: Registry): SubmitMetrics {
  const submissions = outcomeCounter(registry, 'underwriting_submissions_total', 'Submit requests answered, by outcome');
  const upstream = new Histogram({
    name: 'upstream_request_duration_seconds',
    help: "Duration of the provider's underwriting call, by outcome (accepted, rejected, unavailable)",
    labelNames: ['outcome'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  const forwards = outcomeCounter(registry, 'underwriting_forwards_total', 'Queued submits forwarded, by what became of them (submitted, requeued, cancelled, submit_failed)');
  return {
    answered: (outcome) => submissions.inc({ outcome }),
    upstream: (seconds, outcome) => upstream.observe({ outcome }, seconds),
    forwarded: (outcome) => forwards.inc({ outcome }),
  };
}

/** The metric outcome of an answer the submit handler never produced itself (refused before or around it). */
export function metricOutcomeOfStatus(statusCode: number): SubmitMetricOutcome {
  if (statusCode === 400) return 'invalid';
  if (statusCode === 403) return 'forbidden';
  if (statusCode === 413) return 'too_large';
  if (statusCode === 415) return 'invalid';
  if (statusCode === 503) return 'storage_unavailable';
  return 'error';
}
