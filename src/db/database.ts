import { mkdir, stat } from 'node:fs/promises';
import path from 'node:path';
import type { PGlite } from '@electric-sql/pglite';
import { CompiledQuery, Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { PGliteDialect } from './pglite-dialect.js';
import type { DB } from './types.js';

export type Engine = 'postgres' | 'pglite';

export interface Database {
  db: Kysely<DB>;
  /**
   * One connection of its own (PostgreSQL; the same as db on PGlite) for the after-commit NOTIFY,
   * so that it never queues behind the main pool's writes.
   */
  notifyDb: Kysely<DB>;
  engine: Engine;
  /** Set on PostgreSQL: where a dedicated LISTEN connection connects. */
  connectionString: string | undefined;
  /** Set on PGlite: its own listen() API stands in for LISTEN. */
  pglite: PGlite | undefined;
  /** Resolves when the database answers within timeoutMs, rejects otherwise. */
  ping(timeoutMs: number): Promise<void>;
  close(): Promise<void>;
}

export interface OpenDatabaseOptions {
  /** PostgreSQL connection string; unset means embedded PGlite. */
  databaseUrl: string | undefined;
  /** PGlite's directory, or "memory://" for a throwaway one. */
  dataDir: string;
  poolSize?: number;
  /** Errors of pooled connections (the database went away); never allowed to crash the process. */
  onIdleError?: (err: Error) => void;
}

/** int8 as a JS number on both engines (PGlite already does); ids stay far below 2^53. */
const PG_INT8 = 20;
const pgTypes = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === PG_INT8 ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
};

export async function openDatabase(options: OpenDatabaseOptions): Promise<Database> {
  if (options.databaseUrl) return openPostgres(options.databaseUrl, options);
  return openPglite(options.dataDir);
}

function openPostgres(connectionString: string, options: OpenDatabaseOptions): Database {
  const pool = openPool(connectionString, options.poolSize ?? 10, options);
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
  pools.set(db, pool);
  const notifyDb = new Kysely<DB>({ dialect: new PostgresDialect({ pool: openPool(connectionString, 1, options) }) });
  return {
    db,
    notifyDb,
    engine: 'postgres',
    connectionString,
    pglite: undefined,
    ping: (timeoutMs) => withTimeout(sql`select 1`.execute(db), timeoutMs),
    close: async () => {
      await Promise.all([db.destroy(), notifyDb.destroy()]);
    },
  };
}

function openPool(connectionString: string, max: number, options: OpenDatabaseOptions): pg.Pool {
  const pool = new pg.Pool({
    connectionString,
    max,
    connectionTimeoutMillis: 3000,
    idleTimeoutMillis: 30_000,
    keepAlive: true,
    // A query against a database that vanished must fail, not hang a request forever.
    query_timeout: 15_000,
    statement_timeout: 15_000,
    application_name: 'underwriting-gateway',
    types: pgTypes,
  });
  const onError = (err: Error) => options.onIdleError?.(err);
  pool.on('error', onError);
  // A checked-out client whose connection drops emits 'error' too; the query itself fails
  // and is answered 503, so the event must never become an uncaught exception.
  pool.on('connect', (client) => client.on('error', onError));
  return pool;
}

/** A hot statement written once as SQL; its name must be unique in the process. */
export interface Statement {
  name: string;
  text: string;
}

const pools = new WeakMap<Kysely<DB>, pg.Pool>();

/**
 * Runs a statement: on PostgreSQL as a named prepared statement (parsed and planned once per
 * connection, not on every call; Kysely cannot name one), on PGlite as plain SQL.
 */
export async function runStatement<R>(db: Kysely<DB>, statement: Statement, parameters: readonly unknown[]): Promise<R[]> {
  const pool = pools.get(db);
  if (pool) return (await pool.query<R & pg.QueryResultRow>({ name: statement.name, text: statement.text, values: [...parameters] })).rows;
  return (await db.executeQuery<R>(CompiledQuery.raw(statement.text, [...parameters]))).rows;
}

async function openPglite(dataDir: string): Promise<Database> {
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
  const db = new Kysely<DB>({ dialect: new PGliteDialect({ pglite }) });
  return {
    db,
    notifyDb: db,
    engine: 'pglite',
    connectionString: undefined,
    pglite,
    ping: (timeoutMs) => withTimeout(sql`select 1`.execute(db), timeoutMs),
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

/** Thrown where our own code decides the database is out of reach. */
export class StorageUnavailableError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'StorageUnavailableError';
  }
}

const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN']);
const CONNECTION_MESSAGES =
  /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Query read timeout|Connection ended|PGlite is closed|not queryable|pool (is|has been) (ended|closed)|Cannot use a pool after calling end/i;

/**
 * True when an error means "the database cannot be reached right now" (as opposed to a bug or a
 * constraint): connection failures, SQLSTATE class 08, shutdowns, too many connections.
 */
export function isStorageUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  if (err instanceof StorageUnavailableError) return true;
  if (err instanceof AggregateError && err.errors.some(isStorageUnavailable)) return true;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (NETWORK_CODES.has(code)) return true;
    if (code.startsWith('08') || ['57P01', '57P02', '57P03', '53300', '57014'].includes(code)) return true;
  }
  if (CONNECTION_MESSAGES.test(err.message)) return true;
  return err.cause !== undefined && err.cause !== err && isStorageUnavailable(err.cause);
}
