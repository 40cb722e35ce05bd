import { Gauge, type Registry } from 'prom-client';
import type { DatabaseHandle, PoolName } from './handle.js';

const POOLS: readonly PoolName[] = ['routes', 'pacing'];

/** This instance's connection pools, by `pool` (PostgreSQL only: PGlite has none, and exports nothing here). */
export function poolMetrics(registry: Registry, database: Pick<DatabaseHandle, 'poolStats'>): void {
  if (!database.poolStats()) return;
  new Gauge({
    name: 'underwriting_db_pool_connections',
    help: "This instance's pooled PostgreSQL connections, by pool (routes, pacing) and state (in_use: checked out; idle: open, free)",
    labelNames: ['pool', 'state'] as const,
    registers: [registry],
    collect() {
      for (const pool of POOLS) {
        const s = database.poolStats(pool);
        if (!s) continue;
        this.set({ pool, state: 'in_use' }, s.total - s.idle);
        this.set({ pool, state: 'idle' }, s.idle);
      }
    },
  });
  new Gauge({
    name: 'underwriting_db_pool_waiting',
    help: 'Queries of this instance waiting for a pooled PostgreSQL connection (all of the pool in use), by pool',
    labelNames: ['pool'] as const,
    registers: [registry],
    collect() {
      for (const pool of POOLS) this.set({ pool }, database.poolStats(pool)?.waiting ?? 0);
    },
  });
  new Gauge({
    name: 'underwriting_db_pool_max',
    help: 'The most connections a pool of this instance opens, by pool',
    labelNames: ['pool'] as const,
    registers: [registry],
    collect() {
      for (const pool of POOLS) this.set({ pool }, database.poolStats(pool)?.max ?? 0);
    },
  });
}
