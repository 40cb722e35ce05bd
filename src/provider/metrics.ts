import type { Kysely } from 'kysely';
import type { Registry } from 'prom-client';
import type { ProviderPacingConfig } from '../config/config.js';
import type { Tables } from '../db/types.js';
import { scrapeSnapshot, snapshotGauge } from '../observability/metrics.js';
import { readPace } from './sql.js';

// The provider's shared pace in /metrics (docs/observability.md): read from provider_pacing and
// provider_slots at each scrape, so an idle instance shows the circuit another instance opened or
// closed, and a Retry-After every instance obeys. One read serves the three gauges of a scrape.

export function paceMetrics(registry: Registry, deps: { db: Kysely<Tables>; config: ProviderPacingConfig }): void {
  const snapshot = scrapeSnapshot(async () => {
    const pace = await readPace(deps.db, deps.config.maxInFlight);
    if (!pace) throw new Error('provider_pacing has no row');
    return pace;
  });
  // A lost database keeps the previous values (as every cluster gauge): readiness shows the outage.
  const gauge = (name: string, help: string, value: (pace: NonNullable<Awaited<ReturnType<typeof readPace>>>) => number) =>
    snapshotGauge(registry, snapshot, name, help, value);
  gauge(
    'underwriting_provider_circuit_open',
    'Consecutive provider failures reached PROVIDER_CIRCUIT_FAILURES: 1 while the circuit is open or its probe has not yet succeeded (no calls but the probe), else 0',
    (pace) => (Number(pace.failures) >= deps.config.circuitFailures ? 1 : 0),
  );
  gauge(
    'underwriting_provider_hold_seconds',
    "Seconds until every instance may call the provider again after its Retry-After (or a failure's backoff); 0 when not held",
    (pace) => Number(pace.held_ms) / 1000,
  );
  gauge(
    'underwriting_provider_calls_in_flight',
    'Provider calls in flight across every instance (leased slots, at most PROVIDER_MAX_IN_FLIGHT)',
    (pace) => Number(pace.in_flight),
  );
}
