import type { Kysely } from 'kysely';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Tables } from '../db/types.js';
import { readForScrape } from '../metrics.js';
import { countPending } from './store.js';

export interface LifecycleMetrics {
  expired: Counter;
}

export function lifecycleMetrics(registry: Registry, db: Kysely<Tables>): LifecycleMetrics {
  new Gauge({
    name: 'underwriting_pending_requests',
    help: 'Requests awaiting the provider (submitting or submitted), across every instance sharing the database',
    registers: [registry],
    async collect() {
      try {
        this.set(await readForScrape(countPending(db)));
      } catch {
        // Keep the previous value; /readyz is where an unreachable database shows.
      }
    },
  });
  return {
    expired: new Counter({
      name: 'underwriting_expired_total',
      help: 'Requests this instance marked expired because their callback did not come in time',
      registers: [registry],
    }),
  };
}
