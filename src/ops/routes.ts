import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { Registry } from 'prom-client';
import { z } from 'zod';
import type { DatabaseHandle } from '../db/database.js';
import { AppError, errorBody, errorSchema, storageUnavailable } from '../errors.js';
import { operation } from '../openapi.js';

export interface OpsDeps {
  database: Pick<DatabaseHandle, 'ping'>;
  registry: Registry;
  storage: StorageSuspicion;
  /** True while the instance drains before it stops: readiness 503, everything else still served. */
  draining: () => boolean;
}

const READY_TIMEOUT_MS = 2000;
/** prom-client's registry.contentType, without the charset it adds. */
const PROMETHEUS_TEXT = 'text/plain; version=0.0.4';

/** After a route failed on storage, /readyz answers 503 this long, even if `select 1` still works. */
export const SUSPECT_FOR_MS = 5000;

/**
 * What the routes saw of the database: a database can answer /readyz's `select 1` and still fail
 * every route (read-only after a failover, a full disk, a half-open pooled connection), so a
 * route's storage failure counts against readiness too, for a few seconds.
 */
export interface StorageSuspicion {
  /** A route just failed on storage (answered 503 storage_unavailable). */
  failed(): void;
  /** True while the last such failure is recent. */
  suspect(): boolean;
}

export function storageSuspicion(now: () => number = Date.now): StorageSuspicion {
  let lastFailure = Number.NEGATIVE_INFINITY;
  return {
    failed: () => void (lastFailure = now()),
    suspect: () => now() - lastFailure < SUSPECT_FOR_MS,
  };
}

const status = z.object({ status: z.string() });

const shuttingDown = () => new AppError(503, 'shutting_down', 'this instance is shutting down; use another');

export const opsRoutes =
  (deps: OpsDeps): FastifyPluginAsyncZod =>
  async (app) => {
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
          // Checked at every call (never a cached verdict); a recent route failure weighs too.
          await deps.database.ping(READY_TIMEOUT_MS);
          if (deps.storage.suspect()) {
            request.log.warn('not ready: a route failed on storage in the last few seconds');
            return reply.code(503).send(errorBody(storageUnavailable()) as z.infer<typeof errorSchema>);
          }
          return { status: 'ready' };
        } catch (err) {
          request.log.warn({ err }, 'not ready: database unreachable');
          return reply.code(503).send(errorBody(storageUnavailable()) as z.infer<typeof errorSchema>);
        }
      },
    );

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
