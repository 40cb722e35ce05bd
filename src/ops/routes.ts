import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { Gauge, type Registry } from 'prom-client';
import { z } from 'zod';
import type { DatabaseHandle } from '../db/handle.js';
import { AppError, errorBody, errorSchema, storageUnavailable } from '../http/errors.js';
import { operation } from '../http/openapi.js';

export interface OpsDeps {
  database: Pick<DatabaseHandle, 'probe'>;
  registry: Registry;
  /** True while the instance drains before it stops: readiness 503, everything else still served. */
  draining: () => boolean;
}

const READY_TIMEOUT_MS = 2000;
/** prom-client's registry.contentType, without the charset it adds. */
const PROMETHEUS_TEXT = 'text/plain; version=0.0.4';

/**
 * /readyz's check: the database's readiness probe, at every call (never a cached verdict), one at
 * a time (concurrent calls share the probe running, so a burst of them takes one connection).
 */
export function readinessCheck(database: Pick<DatabaseHandle, 'probe'>, timeoutMs = READY_TIMEOUT_MS): () => Promise<void> {
  let running: Promise<void> | undefined;
  return () =>
    (running ??= database.probe(timeoutMs).finally(() => {
      running = undefined;
    }));
}

const status = z.object({ status: z.string() });

const shuttingDown = () => new AppError(503, 'shutting_down', 'this instance is shutting down; use another');

/** A scrape's database check gives up sooner than /readyz's: a scrape must not hang on a lost database. */
const SCRAPE_PROBE_MS = 1000;

export const opsRoutes =
  (deps: OpsDeps): FastifyPluginAsyncZod =>
  async (app) => {
    const ready = readinessCheck(deps.database);
    app.get(
      '/healthz',
      { schema: { ...operation('getHealth', 'open'), tags: ['operations'], summary: 'The process is alive', response: { 200: status } } },
      async () => ({ status: 'ok' }),
    );

    app.get(
      '/readyz',
      {
        schema: {
          ...operation('getReadiness', 'open'),
          tags: ['operations'],
          summary: 'The database answers (503 while it does not)',
          response: { 200: status, 503: errorSchema },
        },
      },
      async (request, reply) => {
        // Before the database: a load balancer must stop sending here even while the database is fine.
        if (deps.draining()) return reply.code(503).send(errorBody(shuttingDown()) as z.infer<typeof errorSchema>);
        try {
          // Answers for itself: no route traffic is needed to find the database back.
          await ready();
          return { status: 'ready' };
        } catch (err) {
          request.log.warn({ err }, 'not ready: database unreachable');
          return reply.code(503).send(errorBody(storageUnavailable()) as z.infer<typeof errorSchema>);
        }
      },
    );

    // /readyz's probe (draining aside), at each scrape, bounded for the scrape's sake.
    const probe = readinessCheck(deps.database, SCRAPE_PROBE_MS);
    new Gauge({
      name: 'underwriting_database_ready',
      help: "Whether the database answers this instance (1) or not (0): /readyz's probe, bounded to 1 s",
      registers: [deps.registry],
      async collect() {
        this.set(await probe().then(() => 1, () => 0));
      },
    });

    app.get(
      '/metrics',
      {
        schema: {
          ...operation('getMetrics', 'open'),
          tags: ['operations'],
          summary: 'Prometheus metrics',
          response: {
            200: {
              description: 'The Prometheus text exposition format',
              content: { [PROMETHEUS_TEXT]: { schema: z.string() } },
            },
          },
        },
      },
      async (_request, reply) => {
        const body = await deps.registry.metrics();
        return reply.type(deps.registry.contentType).send(body);
      },
    );
  };
