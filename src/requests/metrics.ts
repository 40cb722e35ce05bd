import type { Kysely } from 'kysely';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Tables } from '../db/types.js';
import { countPending } from './store.js';

/** A scrape never hangs on an unreachable database: the last known value stays. */
const COUNT_TIMEOUT_MS = 1000;

export interface LifecycleMetrics {
  expired: Counter;
}

export function lifecycleMetrics(registry: Registry, db: Kysely<Tables>): LifecycleMetrics {
  new Gauge({
    name: 'underwriting_pending_requests',
    help: 'Requests awaiting the provider (submitting or submitted), across every instance sharing the database',
    registers: [registry],
    async collect() {
      let timer: NodeJS.Timeout | undefined;
      try {
        const n = await Promise.race([
          countPending(db),
          new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new Error('timeout')), COUNT_TIMEOUT_MS);
          }),
        ]);
        this.set(n);
      } catch {
        // Keep the previous value; /readyz is where an unreachable database shows.
      } finally {
        clearTimeout(timer);
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
