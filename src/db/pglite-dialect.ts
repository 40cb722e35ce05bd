import type { PGlite, Transaction } from '@electric-sql/pglite';
import {
  type CompiledQuery,
  type DatabaseConnection,
  type DatabaseIntrospector,
  type Dialect,
  type DialectAdapter,
  type Driver,
  type Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type QueryCompiler,
  type QueryResult,
} from 'kysely';
import { markDatabaseError } from './storage-errors.js';

// Kysely 0.28 (the last release whose engines accept Node 20) has no PGlite dialect; this is the
// small one it lacks. PGlite is a single connection: one user at a time, in arrival order.

class PGliteAdapter extends PostgresAdapter {
  override get supportsTransactionalDdl(): boolean {
    return true;
  }

  // The migrator holds the only connection from lock to unlock: nobody else can run meanwhile.
  override async acquireMigrationLock(): Promise<void> {}
  override async releaseMigrationLock(): Promise<void> {}
}

function rethrownAsDatabaseError(err: unknown): never {
  markDatabaseError(err);
  throw err;
}

class PGliteConnection implements DatabaseConnection {
  #transaction: Transaction | undefined;
  #finish: ((commit: boolean) => void) | undefined;
  #closed: Promise<unknown> | undefined;

  constructor(readonly pglite: PGlite) {}

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    const { rows, affectedRows } = await (this.#transaction ?? this.pglite)
      .query<R>(query.sql, [...query.parameters], { rowMode: 'object' })
      .catch(rethrownAsDatabaseError);
    return { rows, numAffectedRows: affectedRows === undefined ? undefined : BigInt(affectedRows) };
  }

  // eslint-disable-next-line require-yield
  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error('PGlite does not stream query results');
  }

  /** PGlite's own transaction() locks the instance, so its listen() and direct queries wait too. */
  async begin(): Promise<void> {
    let begun!: () => void;
    const started = new Promise<void>((resolve) => (begun = resolve));
    const commits = new Promise<boolean>((resolve) => (this.#finish = resolve));
    this.#closed = this.pglite.transaction(async (tx) => {
      this.#transaction = tx;
      begun();
      if (!(await commits)) await tx.rollback();
    });
    await Promise.race([started, this.#closed]).catch(rethrownAsDatabaseError);
  }

  async end(commit: boolean): Promise<void> {
    const closed = this.#closed;
    this.#finish?.(commit);
    this.#finish = undefined;
    this.#transaction = undefined;
    this.#closed = undefined;
    if (commit) await closed?.catch(rethrownAsDatabaseError);
    else await closed?.catch(() => {});
  }
}

class PGliteDriver implements Driver {
  readonly #connection: PGliteConnection;
  /** Callers waiting for the connection, first come first served. */
  readonly #queue: Array<() => void> = [];
  #busy = false;

  constructor(pglite: PGlite) {
    this.#connection = new PGliteConnection(pglite);
  }

  async init(): Promise<void> {
    await this.#connection.pglite.waitReady;
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    if (this.#busy) await new Promise<void>((resolve) => this.#queue.push(resolve));
    this.#busy = true;
    return this.#connection;
  }

  async releaseConnection(): Promise<void> {
    const next = this.#queue.shift();
    if (next) next();
    else this.#busy = false;
  }

  async beginTransaction(): Promise<void> {
    await this.#connection.begin();
  }

  async commitTransaction(): Promise<void> {
    await this.#connection.end(true);
  }

  async rollbackTransaction(): Promise<void> {
    await this.#connection.end(false);
  }

  async destroy(): Promise<void> {
    if (!this.#connection.pglite.closed) await this.#connection.pglite.close();
  }
}

export class PGliteDialect implements Dialect {
  constructor(private readonly config: { pglite: PGlite }) {}

  createAdapter(): DialectAdapter {
    return new PGliteAdapter();
  }

  createDriver(): Driver {
    return new PGliteDriver(this.config.pglite);
  }

  createIntrospector(db: Kysely<unknown>): DatabaseIntrospector {
    return new PostgresIntrospector(db);
  }

  createQueryCompiler(): QueryCompiler {
    return new PostgresQueryCompiler();
  }
}
