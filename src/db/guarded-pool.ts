// PostgreSQL's connection pools, guarded: a connection on which a query timed out (half-open, most
// likely) is destroyed instead of handed out again, and those opened before it are replaced.
import net from 'node:net';
import type { Kysely } from 'kysely';
import pg from 'pg';
import type { HealthEvent, PoolMode } from './handle.js';
import { NO_GENERIC_PLANS, PLANS_MADE_ONCE } from './handle.js';
import { isPreparedStatementMismatch, POOL_MODE_MISMATCH } from './pool-mode.js';
import { drewDeadConnection, isStorageUnavailable, markDatabaseError, StorageUnavailableError } from './storage-errors.js';
import type { Tables } from './types.js';

/**
 * Connections a pool keeps open however long they sit idle (at most its size): about what a burst
 * of callbacks holds at once (the writer's two batches in flight, the delivery worker, a read).
 * Closed after a quiet spell, they had to be opened again at the next burst's start, each with its
 * connection set up and its prepared statements planned anew.
 */
export const KEEP_OPEN = 4;

/** int8 as a JS number on both engines (PGlite already does); ids stay far below 2^53. */
const PG_INT8 = 20;
const pgTypes = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === PG_INT8 ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
};

export interface PoolSettings {
  /** Every open socket of the database's pools and the epoch it was opened in, so that close() can destroy half-open ones. */
  sockets: Map<net.Socket, number>;
  poolMode: PoolMode;
  queryTimeoutMs: number;
  /**
   * Bumped by every query timeout and every connection found dead on use: a connection that was
   * open before it may be half-open or dead as well (a network path that went silent, or a blink,
   * takes all of them), so it is closed at its next checkout instead of failing a query of its own
   * (a timeout later, for a half-open one). Shared by the database's pools.
   */
  epoch: number;
  idleTimeoutMs: number;
  onIdleError: ((err: Error) => void) | undefined;
  /** Cleared once called. */
  onPoolModeMismatch: ((err: Error) => void) | undefined;
  /** Set once a query showed the pooler does not keep sessions: readiness fails until a probe finds sessions kept again. */
  poolModeMismatch?: Error;
  emit: (event: HealthEvent) => void;
  /** Each checked-out connection with a query running, and when (performance.now()) it was sent. */
  running: Map<pg.PoolClient, number>;
}

/**
 * Ends every query that has been running for runningForMs or longer by destroying its connection:
 * the query fails at once as a lost connection (503 for its request) instead of waiting out its
 * timeout. For the end of a shutdown, when the database stopped answering: a request must get its
 * answer before the process exits. Returns how many it ended.
 */
export function abortStuckQueries(settings: PoolSettings, runningForMs: number): number {
  const now = performance.now();
  let aborted = 0;
  for (const [client, since] of settings.running) {
    if (now - since < runningForMs) continue;
    settings.running.delete(client);
    (client as unknown as { connection?: { stream?: net.Socket } }).connection?.stream?.destroy();
    aborted += 1;
  }
  return aborted;
}

/** How a pool's connections plan (session mode): every call (the routes'), or once per statement (the pacing pool's). */
export type Planning = 'every call' | 'once';

export interface PoolOptions {
  /** Default 'every call'. */
  planning?: Planning;
  /** Connections kept open however long idle (default KEEP_OPEN, at most max). */
  keepOpen?: number;
}

export function openPool(connectionString: string, max: number, settings: PoolSettings, options: PoolOptions = {}): pg.Pool {
  const planning = options.planning ?? 'every call';
  const pool = new pg.Pool({
    connectionString,
    max,
    min: Math.min(max, options.keepOpen ?? KEEP_OPEN),
    connectionTimeoutMillis: 3000,
    idleTimeoutMillis: settings.idleTimeoutMs,
    keepAlive: true,
    // A query against a database that vanished (or a half-open connection) must fail, not hang a
    // request forever; GuardedPool then destroys the connection. No startup parameter beyond the
    // application name: a pooler such as PgBouncer refuses the others (statement_timeout, options).
    query_timeout: settings.queryTimeoutMs,
    application_name: 'underwriting-gateway',
    types: pgTypes,
    stream: () => {
      const socket = new net.Socket();
      settings.sockets.set(socket, settings.epoch);
      socket.once('close', () => settings.sockets.delete(socket));
      return socket;
    },
    // The server-side bound too, where a connection is ours for the session. Behind a transaction
    // pooler a SET would leak onto other clients' transactions: there the client-side timeout
    // (which closes the connection, so the pooler closes its server connection) is the bound.
    // No JIT: without statistics the callback statement's estimated cost can pass jit_above_cost,
    // and compiling it then costs more than running the batch (docs/performance-history.md).
    ...(settings.poolMode === 'session'
      ? { onConnect: (client: pg.PoolClient) => client.query(`set statement_timeout = ${settings.queryTimeoutMs}; set jit = off; ${planning === 'once' ? PLANS_MADE_ONCE : NO_GENERIC_PLANS}`).then(() => {}) }
      : {}),
  } as pg.PoolConfig);
  const onError = (err: Error) => settings.onIdleError?.(err);
  pool.on('error', onError);
  // A checked-out client whose connection drops emits 'error' too; the query itself fails
  // and is answered 503, so the event must never become an uncaught exception.
  pool.on('connect', (client) => client.on('error', onError));
  return pool;
}

const QUERY_TIMEOUT = /Query read timeout/;

/**
 * SQLSTATEs a healthy, directly connected PostgreSQL never gives the gateway's own statements, but a
 * pooler in the wrong mode does: a prepared statement that exists already or not at all on the
 * server connection the pooler picked (26000, 42P05), and a protocol violation (08P01).
 */
function isPoolerMisuse(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '26000' || code === '42P05' || code === '08P01';
}

/**
 * The pool as Kysely and runStatement see it: a connection on which a query failed for want of the
 * database (a timeout above all) is destroyed on release, never handed out again. pg's
 * query_timeout answers the caller but leaves the query active on the connection, and Kysely
 * releases it without an error, so the pool would otherwise hand a half-open connection out again.
 */
export class GuardedPool {
  constructor(
    readonly pool: pg.Pool,
    private readonly settings: PoolSettings,
  ) {}

  /** The last query (pings aside) failed for want of the database, or in a way no healthy database answers, at this time. */
  failingSince: number | undefined;

  #clients = new WeakMap<pg.PoolClient, GuardedClient>();

  get poolMode(): PoolMode {
    return this.settings.poolMode;
  }

  get queryTimeoutMs(): number {
    return this.settings.queryTimeoutMs;
  }

  /** Kysely reads the pool's options (for its cancel connection). */
  get options(): object {
    return this.pool.options;
  }

  async connect(): Promise<GuardedClient> {
    for (;;) {
      let client: pg.PoolClient;
      try {
        client = await this.pool.connect();
      } catch (err) {
        markDatabaseError(err);
        this.settled(err);
        throw err;
      }
      // One wrapper per connection, as Kysely keeps its own state per client object.
      let guarded = this.#clients.get(client);
      if (!guarded) this.#clients.set(client, (guarded = new GuardedClient(client, this.settings, this)));
      if (guarded.epoch === this.settings.epoch) return guarded;
      // Opened before a query timed out, or a connection was found dead, somewhere: maybe just as
      // half-open or dead. Close it, open another.
      destroy(client, new Error('opened before a query timed out or a connection was found dead'));
    }
  }

  /** A query or connect finished: undefined when it succeeded, else its error. */
  settled(err: unknown): void {
    if (err === undefined) {
      if (this.failingSince === undefined) return;
      this.failingSince = undefined;
      this.settings.emit('recovered');
    } else if (isStorageUnavailable(err) || isPoolerMisuse(err)) {
      this.failingSince ??= Date.now();
      if (this.settings.poolMode === 'session' && isPreparedStatementMismatch(err) && !this.settings.poolModeMismatch) {
        this.settings.poolModeMismatch = new StorageUnavailableError(POOL_MODE_MISMATCH, { cause: err });
        const report = this.settings.onPoolModeMismatch;
        this.settings.onPoolModeMismatch = undefined;
        report?.(new Error(POOL_MODE_MISMATCH, { cause: err }));
      }
    }
  }

  end(): Promise<void> {
    return this.pool.end();
  }
}

/** Gives a pooled client back for good: pg-pool drops it, and its socket closes now, half-open or not. */
function destroy(client: pg.PoolClient, reason: Error): void {
  client.release(reason);
  // Ending waits for the server to close a connection with no query active on it, and a
  // half-open one never does; pg-pool only pulses its waiting queue once it has.
  (client as unknown as { connection?: { stream?: net.Socket } }).connection?.stream?.destroy();
}

class GuardedClient {
  #failure: Error | undefined;
  readonly epoch: number;

  constructor(
    readonly client: pg.PoolClient,
    private readonly settings: PoolSettings,
    private readonly owner: GuardedPool,
  ) {
    this.epoch = settings.epoch;
  }

  // Kysely's PostgresPoolClient: query(text, values); also query(config) for runStatement.
  query(...args: unknown[]): any {
    const result = (this.client.query as (...a: unknown[]) => unknown)(...args);
    if (result instanceof Promise) {
      const since = performance.now();
      this.settings.running.set(this.client, since);
      const done = () => {
        if (this.settings.running.get(this.client) === since) this.settings.running.delete(this.client);
      };
      return result.then(
        (value: unknown) => {
          done();
          this.owner.settled(undefined);
          return value;
        },
        (err: unknown) => {
          done();
          markDatabaseError(err);
          this.owner.settled(err);
          this.#noteFailure(err);
          throw err;
        },
      );
    }
    return result;
  }

  #noteFailure(err: unknown): void {
    if (!isStorageUnavailable(err)) return;
    this.#failure = err as Error;
  }

  get processID(): number | undefined {
    return (this.client as { processID?: number }).processID;
  }

  release(discard?: boolean): void {
    const failure = this.#failure ?? (discard ? new Error('discarded') : undefined);
    this.#failure = undefined;
    if (!failure) {
      this.client.release();
      return;
    }
    destroy(this.client, failure);
    if (QUERY_TIMEOUT.test(failure.message)) {
      this.settings.epoch += 1;
      this.settings.emit('timeout');
    } else if (drewDeadConnection(failure)) {
      // Found dead on use: a blink takes every connection open then, and the pool learns of each
      // only when it fails a statement. Those opened before are closed at their next checkout instead.
      this.settings.epoch += 1;
    }
  }
}

const pools = new WeakMap<Kysely<Tables>, GuardedPool>();

/** Ties a Kysely instance to the guarded pool it runs on, for runStatement. */
export function attachPool(db: Kysely<Tables>, pool: GuardedPool): void {
  pools.set(db, pool);
}

/** The guarded pool a Kysely instance runs on; undefined on PGlite. */
export function guardedPoolOf(db: Kysely<Tables>): GuardedPool | undefined {
  return pools.get(db);
}
