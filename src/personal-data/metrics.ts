import { Counter, type Registry } from 'prom-client';
import type { ErasedCounts } from './sql.js';

export interface PersonalDataMetrics {
  exported(outcome: 'exported' | 'not_found'): void;
  erased(outcome: 'erased' | 'in_flight', counts?: ErasedCounts): void;
}

export function personalDataMetrics(registry: Registry): PersonalDataMetrics {
  const exports = new Counter({
    name: 'underwriting_personal_data_exports_total',
    help: 'Personal-data exports answered by this instance, by outcome (exported, not_found)',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  const erasures = new Counter({
    name: 'underwriting_personal_data_erasures_total',
    help: 'Personal-data erasures requested of this instance, by outcome (erased, in_flight)',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  const rows = new Counter({
    name: 'underwriting_personal_data_erased_rows_total',
    help: 'Rows deleted by erasures on this instance, by table',
    labelNames: ['table'] as const,
    registers: [registry],
  });
  return {
    exported: (outcome) => exports.inc({ outcome }),
    erased(outcome, counts) {
      erasures.inc({ outcome });
      if (!counts) return;
      rows.inc({ table: 'underwriting_requests' }, counts.requests);
      rows.inc({ table: 'callbacks' }, counts.callbacks);
      rows.inc({ table: 'events' }, counts.events);
      rows.inc({ table: 'idempotency_keys' }, counts.idempotencyKeys);
    },
  };
}
