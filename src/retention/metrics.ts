import { Counter, type Registry } from 'prom-client';
import { type Purged, PURGED_TABLES } from './sweep.js';

export interface RetentionMetrics {
  /** Counts a pass's purged rows, by table. */
  purged(purged: Purged): void;
}

export function retentionMetrics(registry: Registry): RetentionMetrics {
  const purgedRows = new Counter({
    name: 'underwriting_retention_purged_rows_total',
    help: 'Rows this instance deleted because they were older than RETENTION_DAYS, by table',
    labelNames: ['table'] as const,
    registers: [registry],
  });
  // Present from the start, so a dashboard tells "nothing purged" from "no data".
  for (const table of PURGED_TABLES) purgedRows.inc({ table }, 0);
  return {
    purged: (purged) => {
      for (const table of PURGED_TABLES) if (purged[table] > 0) purgedRows.inc({ table }, purged[table]);
    },
  };
}
