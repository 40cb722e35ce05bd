import type { FastifyInstance } from 'fastify';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/**
 * prom-client's default gauges whose names end in `_total`, which Prometheus reserves for
 * counters (`promtool check metrics` flags them); each is the sum of its by-type gauge
 * (`nodejs_active_handles{type}` and the like), which stays.
 */
export const EXCLUDED_DEFAULT_METRICS = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'] as const;

/** One registry per app instance, so that several apps in one process (tests) never collide. */
export function createRegistry(): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  for (const name of EXCLUDED_DEFAULT_METRICS) registry.removeSingleMetric(name);
  return registry;
}

/** Request count and latency by route and status, for every route the app serves. */
export function instrumentRequests(app: FastifyInstance, registry: Registry): void {
  const requests = new Counter({
    name: 'http_requests_total',
    help: 'HTTP requests answered, by method, route and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'HTTP request latency, by method, route and status',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  app.addHook('onResponse', (request, reply, done) => {
    // The route template, never the raw URL: bounded label values, and no customer ids in metrics.
    const route = request.routeOptions.url ?? 'unmatched';
    const labels = { method: request.method, route, status: String(reply.statusCode) };
    requests.inc(labels);
    duration.observe(labels, reply.elapsedTime / 1000);
    done();
  });
}

/** A capability's answers counted by outcome (underwriting_submissions_total, underwriting_callbacks_total). */
export function outcomeCounter(registry: Registry, name: string, help: string): Counter<'outcome'> {
  return new Counter({ name, help, labelNames: ['outcome'] as const, registers: [registry] });
}

/** Said in the HELP of every gauge read from the shared database. */
export const CLUSTER_WIDE = 'read from the shared database, so every instance exports the same value: aggregate with max(), never sum()';

/** A scrape never hangs on an unreachable database: a gauge's read gives up after this long. */
const SCRAPE_READ_TIMEOUT_MS = 1000;

/** A gauge's database read, bounded by SCRAPE_READ_TIMEOUT_MS: rejects past it, and the gauge keeps its last value. */
export async function readForScrape<T>(read: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      read,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('timeout')), SCRAPE_READ_TIMEOUT_MS);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * One database read shared by the gauges of one scrape: every gauge's collect() awaits the same
 * read, so the figures printed together come from one snapshot (a gauge set while another was
 * collected would print the previous scrape's value). Resolves undefined when the read failed or
 * timed out: the gauges then keep their previous values, and /readyz is where the outage shows.
 */
export function scrapeSnapshot<T>(read: () => Promise<T>): () => Promise<T | undefined> {
  let current: Promise<T | undefined> | undefined;
  return () =>
    (current ??= readForScrape(read())
      .catch(() => undefined)
      .finally(() => {
        current = undefined;
      }));
}

/**
 * A cluster-wide gauge without labels, set at each scrape from the scrape's one shared read
 * (scrapeSnapshot); a failed read leaves its previous value.
 */
export function snapshotGauge<T>(registry: Registry, snapshot: () => Promise<T | undefined>, name: string, help: string, value: (read: T) => number): Gauge {
  return new Gauge({
    name,
    help: `${help}; ${CLUSTER_WIDE}`,
    registers: [registry],
    async collect() {
      const read = await snapshot();
      if (read !== undefined) this.set(value(read));
    },
  });
}

/** A histogram without labels, registered on this app's registry. */
export function histogram(registry: Registry, name: string, help: string, buckets: number[]): Histogram {
  return new Histogram({ name, help, buckets, registers: [registry] });
}
