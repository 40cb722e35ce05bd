import type { Kysely } from 'kysely';
import { Gauge, type Registry } from 'prom-client';
import type { Tables } from '../db/types.js';
import { CLUSTER_WIDE, scrapeSnapshot, snapshotGauge } from '../observability/metrics.js';
import { type PresentRow, readDeliveriesByUrl, readPresent, type UrlDeliveriesRow } from './sql.js';

/** Per-URL series at most; the URLs past them (by name) are summed under url="other". */
export const MAX_URL_SERIES = 20;


export interface PresentMetricsDeps {
  db: Kysely<Tables>;
  clock: () => Date;
  /** The webhook endpoints' keys (configured and API-managed): their deliveries not written yet count as pending. */
  webhookKeys: () => Promise<readonly string[]>;
}

const DAY_MS = 24 * 3600_000;

/**
 * What stands now, as gauges: the figures of /v1/stats' `now`, read with the same statement once
 * per scrape, so a scrape and /v1/stats agree; and the deliveries per URL.
 */
export function presentMetrics(registry: Registry, deps: PresentMetricsDeps): void {
  const snapshot = scrapeSnapshot(async () => {
    const now = deps.clock();
    const keys = await deps.webhookKeys();
    const [present, byUrl] = await Promise.all([
      readPresent(deps.db, new Date(now.getTime() - DAY_MS), keys),
      readDeliveriesByUrl(deps.db, keys),
    ]);
    return { now, present, byUrl };
  });
  const ageS = (now: Date, then: Date | null) => (then === null ? 0 : Math.max(0, (now.getTime() - new Date(then).getTime()) / 1000));

  const gauge = (name: string, help: string, value: (now: Date, row: PresentRow) => number) =>
    snapshotGauge(registry, snapshot, name, help, (s) => value(s.now, s.present));

  gauge('underwriting_pending_requests', 'Requests awaiting the provider (queued, submitting or submitted)', (_, r) => Number(r.pending));
  gauge(
    'underwriting_request_oldest_pending_seconds',
    'Age of the oldest request awaiting the provider, since it was submitted or queued (0 when none)',
    (now, r) => ageS(now, r.oldest_pending),
  );
  gauge(
    'underwriting_request_oldest_submitted_seconds',
    'Age of the oldest request submitted and awaiting its callback, since it was submitted: the expiry sweep ends it past CALLBACK_TIMEOUT_S (0 when none)',
    (now, r) => ageS(now, r.oldest_submitted),
  );
  gauge('underwriting_event_deliveries_pending', 'Event deliveries not yet delivered or dead', (_, r) => Number(r.deliveries_pending));
  gauge(
    'underwriting_event_delivery_oldest_pending_seconds',
    'Age of the oldest pending event delivery, since it was queued (0 when none)',
    (now, r) => ageS(now, r.oldest_delivery_pending),
  );

  // Split by whether their endpoint still exists: deleting an endpoint writes off its deliveries
  // (its backlog ends dead, endpoint_deleted), and no redelivery can reach them any more, so an
  // alert on dead deliveries must not count them forever (deploy/prometheus/alerts.yml).
  new Gauge({
    name: 'underwriting_event_deliveries_dead',
    help: `Event deliveries given up (dead) and not redelivered, by whether their endpoint exists (endpoint="exists") or was deleted (endpoint="deleted"); ${CLUSTER_WIDE}`,
    labelNames: ['endpoint'] as const,
    registers: [registry],
    async collect() {
      const s = await snapshot();
      if (!s) return;
      const kept = Number(s.present.deliveries_dead_kept);
      this.set({ endpoint: 'exists' }, kept);
      this.set({ endpoint: 'deleted' }, Number(s.present.deliveries_dead) - kept);
    },
  });

  new Gauge({
    name: 'underwriting_event_url_deliveries',
    help: `Pending and dead event deliveries by receiver origin (scheme, host and port: never a path, userinfo or query; at most ${MAX_URL_SERIES} URLs, the rest under url="other"); ${CLUSTER_WIDE}`,
    labelNames: ['url', 'status'] as const,
    registers: [registry],
    async collect() {
      const s = await snapshot();
      if (!s) return;
      this.reset();
      for (const { url, status, n } of boundedByUrl(s.byUrl)) this.set({ url, status }, n);
    },
  });
}

/** The rows with at most MAX_URL_SERIES distinct URLs: the others summed as "other". */
export function boundedByUrl(rows: readonly UrlDeliveriesRow[]): UrlDeliveriesRow[] {
  const urls = [...new Set(rows.map((r) => originOf(r.url)))].sort();
  const kept = new Set(urls.slice(0, MAX_URL_SERIES));
  const out = new Map<string, UrlDeliveriesRow>();
  for (const row of rows) {
    const origin = originOf(row.url);
    const url = kept.has(origin) ? origin : 'other';
    const key = `${url}\n${row.status}`;
    const seen = out.get(key);
    if (seen) seen.n += row.n;
    else out.set(key, { url, status: row.status, n: row.n });
  }
  return [...out.values()];
}

/**
 * A receiver as a label: its origin (scheme, host, port) only. /metrics is open to every peer that
 * reaches the port, and receivers often carry a token in the path (/services/T0/B0/<token>).
 */
export function originOf(url: string): string {
  try {
    const origin = new URL(url).origin;
    return origin === 'null' ? 'other' : origin;
  } catch {
    return 'other';
  }
}
