import type { Kysely } from 'kysely';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Tables } from '../db/types.js';
import { histogram, readForScrape } from '../metrics.js';
import { pendingSummary } from './sql.js';

export interface EventMetrics {
  result(result: 'delivered' | 'failed' | 'dead', lagS?: number): void;
  /** One more (+1) or one fewer (-1) feed long-poll waiting. */
  waiting(delta: 1 | -1): void;
}

export function eventMetrics(registry: Registry, db: Kysely<Tables>, clock: () => Date, keys: () => readonly string[] = () => []): EventMetrics {
  const deliveries = new Counter({
    name: 'underwriting_event_deliveries_total',
    help: 'Event delivery attempts made by this instance, by result (delivered, failed and retried later, dead)',
    labelNames: ['result'] as const,
    registers: [registry],
  });
  const lag = histogram(
    registry,
    'underwriting_event_delivery_lag_seconds',
    "Seconds from an event's commit to its receiver's 2xx, for deliveries this instance made",
    [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600],
  );
  const oldest = new Gauge({
    name: 'underwriting_event_delivery_oldest_pending_seconds',
    help: 'Age of the oldest pending event delivery (since it was queued), across every instance; 0 when none',
    registers: [registry],
  });
  let summary: Promise<void> | undefined;
  new Gauge({
    name: 'underwriting_event_deliveries_pending',
    help: 'Event deliveries not yet delivered or dead, across every instance sharing the database',
    registers: [registry],
    async collect() {
      summary ??= (async () => {
        try {
          const s = await readForScrape(pendingSummary(db, keys()));
          this.set(s.pending);
          oldest.set(s.oldest ? Math.max(0, (clock().getTime() - s.oldest.getTime()) / 1000) : 0);
        } catch {
          // Keep the previous values; /readyz is where an unreachable database shows.
        } finally {
          summary = undefined;
        }
      })();
      await summary;
    },
  });
  const waiters = new Gauge({
    name: 'underwriting_event_feed_waiters',
    help: 'Feed long-polls (GET /v1/events?wait=N) this instance is holding open right now',
    registers: [registry],
  });
  for (const result of ['delivered', 'failed', 'dead'] as const) deliveries.inc({ result }, 0);
  return {
    result(result, lagS) {
      deliveries.inc({ result });
      if (lagS !== undefined) lag.observe(Math.max(0, lagS));
    },
    waiting(delta) {
      waiters.inc(delta);
    },
  };
}
