import { Gauge, type Registry } from 'prom-client';
import type { DatabaseHandle } from './handle.js';

/** This instance's main connection pool (PostgreSQL only: PGlite has none, and exports nothing here). */
export function poolMetrics(registry: Registry, database: Pick<DatabaseHandle, 'poolStats'>): void {
  if (!database.poolStats()) return;
  new Gauge({
    name: 'underwriting_db_pool_connections',
    help: "This instance's pooled PostgreSQL connections, by state (in_use: checked out; idle: open, free)",
    labelNames: ['state'] as const,
    registers: [registry],
    collect() {
      const s = database.poolStats();
      if (!s) return;
      this.set({ state: 'in_use' }, s.total - s.idle);
      this.set({ state: 'idle' }, s.idle);
    },
  });
  new Gauge({
    name: 'underwriting_db_pool_waiting',
    help: 'Queries of this instance waiting for a pooled PostgreSQL connection (all of them in use)',
    registers: [registry],
    collect() {
      this.set(database.poolStats()?.waiting ?? 0);
    },
  });
  new Gauge({
    name: 'underwriting_db_pool_max',
    help: 'The most connections the pool of this instance opens',
    registers: [registry],
    collect() {
      this.set(database.poolStats()?.max ?? 0);
    },
  });
}
