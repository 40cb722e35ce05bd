import { Counter, Gauge, type Registry } from 'prom-client';
import { histogram } from '../observability/metrics.js';
import type { ReadKind } from './read-limiter.js';

export interface EventMetrics {
  result(result: 'delivered' | 'failed' | 'dead', lagS?: number): void;
  /** One more (+1) or one fewer (-1) feed long-poll waiting. */
  waiting(delta: 1 | -1): void;
  /** One more (+1) or one fewer (-1) feed read queued for a slot (FEED_READS_IN_FLIGHT), of its kind. */
  feedReadQueued(kind: ReadKind, delta: 1 | -1): void;
}

// The database-wide delivery gauges (pending, dead, oldest pending, per URL) are read once per
// scrape with /v1/stats' own statement: src/stats/metrics.ts.
export function eventMetrics(registry: Registry): EventMetrics {
  const deliveries = new Counter({
    name: 'underwriting_event_deliveries_total',
    help: 'Event delivery attempts made by this instance, by result (delivered, failed and retried later, dead)',
    labelNames: ['result'] as const,
    registers: [registry],
  });
  // Up to the default EVENT_RETRY_HORIZON_S (3 days): a delivery made after a receiver's long
  // outage is read as its lag, not as the last bucket's bound (histogram_quantile's ceiling).
  const lag = histogram(
    registry,
    'underwriting_event_delivery_lag_seconds',
    "Seconds from an event's commit to its receiver's 2xx, for deliveries this instance made",
    [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600, 21600, 86400, 259200],
  );
  const waiters = new Gauge({
    name: 'underwriting_event_feed_waiters',
    help: 'Feed long-polls (GET /v1/events?wait=N) this instance is holding open right now',
    registers: [registry],
  });
  const queued = new Gauge({
    name: 'underwriting_event_feed_reads_queued',
    help: "Feed reads (GET /v1/events) queued on this instance for one of its bounded read slots, by read: a request's first, or a waiting long-poll's again",
    labelNames: ['read'] as const,
    registers: [registry],
  });
  for (const result of ['delivered', 'failed', 'dead'] as const) deliveries.inc({ result }, 0);
  for (const read of ['first', 'again'] as const) queued.set({ read }, 0);
  return {
    result(result, lagS) {
      deliveries.inc({ result });
      if (lagS !== undefined) lag.observe(Math.max(0, lagS));
    },
    waiting(delta) {
      waiters.inc(delta);
    },
    feedReadQueued(read, delta) {
      queued.inc({ read }, delta);
    },
  };
}
