// What an open database is to the rest of the gateway: the handle, its options, the bounds every query obeys.
import type { PGlite } from '@electric-sql/pglite';
import type { Kysely } from 'kysely';
import type { Tables } from './types.js';

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
  /**
   * The provider pace's pool (PostgreSQL; the same as db on PGlite): the pacer's takes and returns,
   * the forwarder's claims and outcomes. Its connections keep each statement's plan, made once with
   * sequential scans off (PLANS_MADE_ONCE), instead of planning it on every call as NO_GENERIC_PLANS
   * has db's do: run at the provider's rate, that planning was most of the database's CPU per
   * forward. Only for statements whose one sane plan is by index whatever the statistics
   * (test/db/plan-states-pacing.test.ts).
   */
  pacingDb: Kysely<Tables>;
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
  /** A pool's connections now (PostgreSQL; default the routes' pool); undefined on PGlite, which has no pool. */
  poolStats(pool?: PoolName): PoolStats | undefined;
  /** In session mode on PostgreSQL, rejects (naming DATABASE_POOL_MODE) when the pooler does not keep sessions, or when the check could not finish (a session pooler with no room for its two connections). */
  verifyPoolMode(): Promise<void>;
  /**
   * PostgreSQL: ends every query running for runningForMs or longer (its connection destroyed, so
   * it fails as a lost connection, 503) and says how many. For the end of a shutdown, when the
   * database stopped answering. Absent on PGlite, whose queries cannot hang on a network.
   */
  abortStuckQueries?(runningForMs: number): number;
  close(): Promise<void>;
}

/** The routes' pool (DatabaseHandle.db) or the pacing pool (DatabaseHandle.pacingDb). */
export type PoolName = 'routes' | 'pacing';

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
  /** PGlite only: a dumpDataDir archive the new database starts from, instead of an empty cluster (tests). */
  loadDataDir?: Blob;
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
 * Every execution is planned for the tables as they are now. A connection lives for hours, and a
 * generic plan it cached (a prepared statement's, or a foreign-key check's) while the tables were
 * tiny kept scanning them whole once they had grown (docs/performance.md).
 */
export const NO_GENERIC_PLANS = 'set plan_cache_mode = force_custom_plan';

/**
 * The pacing pool's connections (DatabaseHandle.pacingDb): each prepared statement is planned once
 * per connection, and so are its foreign-key checks, with sequential scans off, so that a plan made
 * while the tables were tiny still looks up by index once they have grown (NO_GENERIC_PLANS's
 * reason). The session-level form of STATEMENT_PLANNED_ONCE (db/plan-guards.ts), without its
 * transaction's two round trips: the take holds the shared pacing row until its commit.
 */
export const PLANS_MADE_ONCE = 'set plan_cache_mode = force_generic_plan; set enable_seqscan = off';

/**
 * The pacing pool's size: the forwarder's writes (FORWARD_WRITES, 3), its loop's one statement, the
 * pacer's one ask at a time (a synchronous submit's take too) and its slot returns (RETURNS_AT_ONCE,
 * 2; test/submissions/forwarder-pool.test.ts checks the sum).
 */
export const PACING_POOL_SIZE = 7;
