import { mkdir, stat } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import type { PGlite } from '@electric-sql/pglite';
import { CompiledQuery, type DialectAdapter, Kysely, PostgresAdapter, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import type { Link } from '@opentelemetry/api';
import { inStatementSpan, type SpanParent } from '../tracing/spans.js';
import { PGliteDialect } from './pglite-dialect.js';
import { isStorageUnavailable, markDatabaseError, StorageUnavailableError } from './storage-errors.js';
import { isPreparedStatementMismatch, POOL_MODE_MISMATCH, verifySessionPooling } from './pool-mode.js';
import { defineStatement, type Statement } from './statements.js';
import type { Tables } from './types.js';

export { isStorageUnavailable, markDatabaseError, StorageUnavailableError } from './storage-errors.js';
export { defineStatement, type Statement } from './statements.js';

export type Engine = 'postgres' | 'pglite';

/**
 * How DATABASE_URL is pooled: `session` (a direct connection or a session-pooling PgBouncer: a
 * connection is ours for as long as we hold it) or `transaction` (a transaction-pooling PgBouncer:
 * every transaction may land on another server connection, so no named prepared statements and
 * no session state).
 */
export type PoolMode = 'session' | 'transaction';

export type HealthEvent = 'timeout' | 'recovered';

/** A query that has not answered in this long fails, and its connection is destroyed. */
export const DEFAULT_QUERY_TIMEOUT_MS = 15_000;

/**
 * The callback statement's own, shorter timeout: a callback held on a half-open connection fails
 * (503, the provider retries) and the connections opened before it are replaced, instead of after
 * 15 s, when the provider may have given up and retried anyway. Far above the statement's worst
 * healthy time under load (docs/performance-history.md).
 */
export const CALLBACK_QUERY_TIMEOUT_MS = 5_000;

/** What openDatabase gives: the Kysely instances (`db` for queries), the engine's details, health, ping and close. */
export interface DatabaseHandle {
  db: Kysely<Tables>;
  /**
   * One connection of its own (PostgreSQL; the same as db on PGlite) for the after-commit NOTIFY,
   * so that it never queues behind the main pool's writes.
   */
  notifyDb: Kysely<Tables>;
  engine: Engine;
  /** Set on PostgreSQL: DATABASE_URL. */
  connectionString: string | undefined;
  /** Set on PostgreSQL: where the dedicated LISTEN connections connect (DATABASE_LISTEN_URL, else DATABASE_URL). */
  listenConnectionString: string | undefined;
  /** Session or transaction pooling; always `session` on PGlite. */
  poolMode: PoolMode;
  /** How long a query may go unanswered before it fails and its connection is destroyed. */
  queryTimeoutMs: number;
  /**
   * Calls fn with `timeout` whenever a query timed out (a half-open connection, most likely: other
   * long-lived connections such as LISTEN should check theirs), and with `recovered` when a query
   * succeeds after queries failed for want of the database. Returns a function that removes it.
   */
  onHealth(fn: (event: HealthEvent) => void): () => void;
  /** Set on PGlite: its own listen() API stands in for LISTEN. */
  pglite: PGlite | undefined;
  /** Resolves when the database answers within timeoutMs, rejects otherwise (at start, before migrations). */
  ping(timeoutMs: number): Promise<void>;
  /**
   * Readiness: a statement of the gateway's kind on the routes' pool (named and prepared where the
   * routes' are, reading one of its tables) answers within timeoutMs, and the database takes writes.
   * Its success clears the pool's failure state, as any route query's would.
   */
  probe(timeoutMs: number): Promise<void>;
  /** The main pool's connections now (PostgreSQL); undefined on PGlite, which has no pool. */
  poolStats(): PoolStats | undefined;
  /** In session mode on PostgreSQL, rejects (naming DATABASE_POOL_MODE) when the pooler does not keep sessions. */
  verifyPoolMode(): Promise<void>;
  close(): Promise<void>;
}

export interface PoolStats {
  /** Connections open, checked out or idle. */
  total: number;
  idle: number;
  /** Callers waiting for a connection. */
  waiting: number;
  /** The most connections the pool opens. */
  max: number;
}

export interface OpenDatabaseOptions {
  /** PostgreSQL connection string; unset means embedded PGlite. */
  databaseUrl: string | undefined;
  /** PGlite's directory, or "memory://" for a throwaway one. */
  dataDir: string;
  poolSize?: number;
  /** Default `session`. */
  poolMode?: PoolMode;
  /** Default: databaseUrl. */
  listenUrl?: string | undefined;
  /** Default DEFAULT_QUERY_TIMEOUT_MS. */
  queryTimeoutMs?: number;
  /** Errors of pooled connections (the database went away); never allowed to crash the process. */
  onIdleError?: (err: Error) => void;
  /** A connection idle this long is closed, unless it is one of the KEEP_OPEN. Default 30 s. */
  idleTimeoutMs?: number;
  /** Called once, the first time a query shows that the pooler does not keep sessions (DATABASE_POOL_MODE=session). */
  onPoolModeMismatch?: (err: Error) => void;
}

/**
 * Connections a pool keeps open however long they sit idle (at most its size): about what a burst
 * of callbacks holds at once (the writer's two batches in flight, the delivery worker, a read).
 * Closed after a quiet spell, they had to be opened again at the next burst's start, each with its
 * connection set up and its prepared statements planned anew.
 */
export const KEEP_OPEN = 4;

/**
 * Every execution is planned for the tables as they are now. A connection lives for hours, and a
 * generic plan it cached (a prepared statement's, or a foreign-key check's) while the tables were
 * tiny kept scanning them whole once they had grown (docs/performance.md).
 */
export const NO_GENERIC_PLANS = 'set plan_cache_mode = force_custom_plan';

/** int8 as a JS number on both engines (PGlite already does); ids stay far below 2^53. */
const PG_INT8 = 20;
const pgTypes = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === PG_INT8 ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
};

export async function openDatabase(options: OpenDatabaseOptions): Promise<DatabaseHandle> {
  if (options.databaseUrl) return openPostgres(options.databaseUrl, options);
  return openPglite(options.dataDir);
}

function openPostgres(connectionString: string, options: OpenDatabaseOptions): DatabaseHandle {
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
  };
  const main = new GuardedPool(openPool(connectionString, options.poolSize ?? 10, settings), settings);
  const db = new Kysely<Tables>({ dialect: new GatewayPostgresDialect({ pool: main }) });
  pools.set(db, main);
  const notify = new GuardedPool(openPool(connectionString, 1, settings), settings);
  const notifyDb = new Kysely<Tables>({ dialect: new GatewayPostgresDialect({ pool: notify }) });
  pools.set(notifyDb, notify);
  return {
    db,
    notifyDb,
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
    verifyPoolMode: () => (poolMode === 'session' ? verifySessionPooling(main.pool) : Promise.resolve()),
    poolStats: () => ({ total: main.pool.totalCount, idle: main.pool.idleCount, waiting: main.pool.waitingCount, max: main.pool.options.max }),
    close: async () => {
      // Ending a connection waits for the server to close it; a half-open one never does. Those
      // opened before a query timed out are suspect: closed at once. The others get a grace.
      for (const [socket, epoch] of sockets) if (epoch !== settings.epoch) socket.destroy();
      const timer = setTimeout(() => {
        for (const socket of sockets.keys()) socket.destroy();
      }, CLOSE_GRACE_MS);
      try {
        await Promise.all([db.destroy(), notifyDb.destroy()]);
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

/** How long close() lets connections end politely before it destroys their sockets. */
export const CLOSE_GRACE_MS = 1000;

/** The advisory lock that serialises migrations across instances (Kysely's own id). */
export const MIGRATION_LOCK_ID = 3853314791062309107n;

/**
 * Kysely's migrator takes a session-level advisory lock outside its transaction: behind a
 * transaction pooler the lock, the migrations and the unlock may each land on another server
 * connection, and a lock taken in a transaction that then fails is never released. Here the lock
 * is transaction-scoped: migrateToLatest runs the migrator inside one transaction, which takes it.
 */
class TransactionLockAdapter extends PostgresAdapter {
  override async acquireMigrationLock(db: Kysely<any>): Promise<void> {
    await sql`select pg_advisory_xact_lock(${sql.lit(MIGRATION_LOCK_ID)})`.execute(db);
  }

  override async releaseMigrationLock(): Promise<void> {
    // Released by the transaction's end.
  }
}

class GatewayPostgresDialect extends PostgresDialect {
  override createAdapter(): DialectAdapter {
    return new TransactionLockAdapter();
  }
}

interface PoolSettings {
  /** Every open socket of the database's pools and the epoch it was opened in, so that close() can destroy half-open ones. */
  sockets: Map<net.Socket, number>;
  poolMode: PoolMode;
  queryTimeoutMs: number;
  /**
   * Bumped by every query timeout: a connection that was open before it may be half-open as well
   * (a network path that went silent takes all of them), so it is closed at its next checkout
   * instead of failing a query of its own a timeout later. Shared by the database's pools.
   */
  epoch: number;
  idleTimeoutMs: number;
  onIdleError: ((err: Error) => void) | undefined;
  /** Cleared once called. */
  onPoolModeMismatch: ((err: Error) => void) | undefined;
  /** Set once a query showed the pooler does not keep sessions: readiness fails until a probe finds sessions kept again. */
  poolModeMismatch?: Error;
  emit: (event: HealthEvent) => void;
}

function openPool(connectionString: string, max: number, settings: PoolSettings): pg.Pool {
  const pool = new pg.Pool({
    connectionString,
    max,
    min: Math.min(max, KEEP_OPEN),
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
      ? { onConnect: (client: pg.PoolClient) => client.query(`set statement_timeout = ${settings.queryTimeoutMs}; set jit = off; ${NO_GENERIC_PLANS}`).then(() => {}) }
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
class GuardedPool {
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
      // Opened before a query timed out somewhere: maybe just as half-open. Close it, open another.
      destroy(client, new Error('opened before a query timed out'));
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
      return result.then(
        (value: unknown) => {
          this.owner.settled(undefined);
          return value;
        },
        (err: unknown) => {
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
    }
  }
}

const pools = new WeakMap<Kysely<Tables>, GuardedPool>();

/**
 * Runs a statement: on PostgreSQL in session mode as a named prepared statement (parsed and
 * planned once per connection, not on every call; Kysely cannot name one); in transaction mode
 * unnamed (a named statement lives on one server connection, and the next transaction may get
 * another, or a connection where another client prepared the same name); on PGlite as plain SQL.
 * Given a parent (tracing on), inside a client span named by the statement.
 */
/** A statement's own bounds: its query timeout (never longer than the pool's). */
export interface StatementOptions {
  queryTimeoutMs?: number;
}

export function runStatement<R>(
  db: Kysely<Tables>,
  statement: Statement,
  parameters: readonly unknown[],
  parent?: SpanParent,
  links?: Link[],
  options: StatementOptions = {},
): Promise<R[]> {
  if (parent === undefined) return run<R>(db, statement, parameters, options);
  return inStatementSpan(parent, statement, links, () => run<R>(db, statement, parameters, options));
}

async function run<R>(db: Kysely<Tables>, statement: Statement, parameters: readonly unknown[], options: StatementOptions): Promise<R[]> {
  const guarded = pools.get(db);
  if (!guarded) return (await db.executeQuery<R>(CompiledQuery.raw(statement.text, [...parameters]))).rows;
  const client = await guarded.connect();
  try {
    const named = guarded.poolMode === 'session';
    // A statement's own timeout is never longer than the pool's.
    const timeout = options.queryTimeoutMs === undefined ? {} : { query_timeout: Math.min(options.queryTimeoutMs, guarded.queryTimeoutMs) };
    const query = named
      ? { name: statement.name, text: statement.text, values: [...parameters], ...timeout }
      : { text: statement.text, values: [...parameters], ...timeout };
    return ((await client.query(query)) as pg.QueryResult<R & pg.QueryResultRow>).rows;
  } finally {
    client.release();
  }
}

const READINESS_PROBE = defineStatement(
  'readiness_probe',
  "select current_setting('transaction_read_only') = 'on' as read_only, exists (select 1 from underwriting_requests) as used",
);

/**
 * Runs the readiness probe as the routes run their statements. Its own query timeout is the
 * probe's: a probe stuck on a half-open connection fails in timeoutMs, and that connection (and
 * every one opened before it) is replaced, as after any query timeout.
 */
async function probeWith(db: Kysely<Tables>, timeoutMs: number): Promise<void> {
  const [row] = await runStatement<{ read_only: boolean }>(db, READINESS_PROBE, [], undefined, undefined, { queryTimeoutMs: timeoutMs });
  // A standby after a failover answers reads and refuses every write the gateway makes.
  if (row?.read_only) throw new StorageUnavailableError('the database is read-only');
}

async function openPglite(dataDir: string): Promise<DatabaseHandle> {
  // Loaded only when used: a gateway on PostgreSQL never carries the embedded engine's code.
  const { PGlite } = await import('@electric-sql/pglite');
  let pglite: PGlite;
  try {
    if (!dataDir.includes('://')) await makeDirectory(dataDir);
    pglite = await PGlite.create(dataDir);
  } catch (err) {
    // PGlite's own errors can be bare numbers (ErrnoError 54): say where and what to check.
    const reason = err instanceof Error && err.message ? err.message : `${(err as { name?: string })?.name ?? 'error'} ${(err as { errno?: number })?.errno ?? ''}`.trim();
    throw new Error(`DATA_DIR: the embedded database cannot be opened in ${dataDir} (${reason}); it must be a directory this user can create and write to`, { cause: err });
  }
  // One backend for the process's whole life: its foreign-key checks' plans too.
  await pglite.exec(NO_GENERIC_PLANS);
  const db = new Kysely<Tables>({ dialect: new PGliteDialect({ pglite }) });
  return {
    db,
    notifyDb: db,
    engine: 'pglite',
    connectionString: undefined,
    listenConnectionString: undefined,
    poolMode: 'session',
    queryTimeoutMs: DEFAULT_QUERY_TIMEOUT_MS,
    onHealth: () => () => {},
    pglite,
    ping: (timeoutMs) => withTimeout(sql`select 1`.execute(db), timeoutMs),
    probe: (timeoutMs) => withTimeout(probeWith(db, timeoutMs), timeoutMs),
    poolStats: () => undefined,
    verifyPoolMode: () => Promise.resolve(),
    close: async () => {
      await db.destroy();
      if (!pglite.closed) await pglite.close();
    },
  };
}

/**
 * mkdir -p, one level at a time: fs.mkdir's recursive mode never returns where mkdir answers ENOENT
 * under an existing parent (DATA_DIR=/proc/nope hung the start).
 */
async function makeDirectory(dir: string): Promise<void> {
  const missing: string[] = [];
  for (let current = path.resolve(dir); ; ) {
    try {
      await stat(current);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      missing.unshift(current);
      const parent = path.dirname(current);
      if (parent === current) break;
      current = parent;
    }
  }
  for (const level of missing) {
    await mkdir(level).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
    });
  }
}

async function withTimeout(work: Promise<unknown>, timeoutMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new StorageUnavailableError('database did not answer in time')), timeoutMs);
  });
  try {
    await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
