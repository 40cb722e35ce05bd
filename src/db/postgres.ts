// Opening PostgreSQL: the routes' pool, the NOTIFY connection and the pacing pool, guarded, behind one handle.
import type net from 'node:net';
import { Kysely } from 'kysely';
import { abortStuckQueries, attachPool, GuardedPool, openPool, type PoolSettings } from './guarded-pool.js';
import { DEFAULT_QUERY_TIMEOUT_MS, PACING_POOL_SIZE, type DatabaseHandle, type HealthEvent, type OpenDatabaseOptions } from './handle.js';
import { unfinishedCheck, verifySessionPooling } from './pool-mode.js';
import { GatewayPostgresDialect } from './postgres-dialect.js';
import { probeWith, withTimeout } from './readiness.js';
import type { Tables } from './types.js';

export function openPostgres(connectionString: string, options: OpenDatabaseOptions): DatabaseHandle {
  const poolMode = options.poolMode ?? 'session';
  const queryTimeoutMs = options.queryTimeoutMs ?? DEFAULT_QUERY_TIMEOUT_MS;
  const healthListeners = new Set<(event: HealthEvent) => void>();
  const sockets = new Map<net.Socket, number>();
  const settings: PoolSettings = {
    sockets,
    epoch: 0,
    poolMode,
    queryTimeoutMs,
    idleTimeoutMs: options.idleTimeoutMs ?? 30_000,
    onIdleError: options.onIdleError,
    onPoolModeMismatch: options.onPoolModeMismatch,
    emit: (event) => {
      for (const fn of healthListeners) fn(event);
    },
    running: new Map(),
  };
  const main = new GuardedPool(openPool(connectionString, options.poolSize ?? 10, settings), settings);
  const db = new Kysely<Tables>({ dialect: new GatewayPostgresDialect({ pool: main }) });
  attachPool(db, main);
  const notify = new GuardedPool(openPool(connectionString, 1, settings), settings);
  const notifyDb = new Kysely<Tables>({ dialect: new GatewayPostgresDialect({ pool: notify }) });
  attachPool(notifyDb, notify);
  // One kept open (the forwarder looks at the queue every second); the others close once idle.
  const pacing = new GuardedPool(openPool(connectionString, PACING_POOL_SIZE, settings, { planning: 'once', keepOpen: 1 }), settings);
  const pacingDb = new Kysely<Tables>({ dialect: new GatewayPostgresDialect({ pool: pacing }) });
  attachPool(pacingDb, pacing);
  return {
    db,
    notifyDb,
    pacingDb,
    engine: 'postgres',
    pglite: undefined,
    connectionString,
    listenConnectionString: options.listenUrl ?? connectionString,
    poolMode,
    queryTimeoutMs,
    onHealth: (fn) => {
      healthListeners.add(fn);
      return () => {
        healthListeners.delete(fn);
      };
    },
    ping: async (timeoutMs) => {
      await withTimeout(main.pool.query('select 1'), timeoutMs);
    },
    probe: async (timeoutMs) => {
      if (settings.poolModeMismatch) {
        // Seen at run time: ready again only once named statements survive between transactions
        // (the pooler fixed or bypassed), checked anew at each probe, never a verdict for life.
        const seen = settings.poolModeMismatch;
        await withTimeout(verifySessionPooling(main.pool), timeoutMs).catch(() => Promise.reject(seen));
        if (settings.poolModeMismatch === seen) settings.poolModeMismatch = undefined;
      }
      await withTimeout(probeWith(db, timeoutMs), timeoutMs);
    },
    verifyPoolMode: () => (poolMode === 'session' ? verifySessionPooling(main.pool).catch(unfinishedCheck) : Promise.resolve()),
    poolStats: (name = 'routes') => {
      const { pool } = name === 'routes' ? main : pacing;
      return { total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount, max: pool.options.max };
    },
    abortStuckQueries: (runningForMs) => abortStuckQueries(settings, runningForMs),
    close: async () => {
      // Ending a connection waits for the server to close it; a half-open one never does. Those
      // opened before a query timed out are suspect: closed at once. The others get a grace.
      for (const [socket, epoch] of sockets) if (epoch !== settings.epoch) socket.destroy();
      const timer = setTimeout(() => {
        for (const socket of sockets.keys()) socket.destroy();
      }, CLOSE_GRACE_MS);
      try {
        await Promise.all([db.destroy(), notifyDb.destroy(), pacingDb.destroy()]);
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

/** How long close() lets connections end politely before it destroys their sockets. */
export const CLOSE_GRACE_MS = 1000;
