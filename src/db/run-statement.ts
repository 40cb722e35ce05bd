import type { Link } from '@opentelemetry/api';
import { CompiledQuery, type Kysely } from 'kysely';
import type pg from 'pg';
import { inStatementSpan, type SpanParent } from '../tracing/spans.js';
import { guardedPoolOf } from './guarded-pool.js';
import { INDEX_SCANS_ONLY_SQL, STATEMENT_PLANNED_ONCE } from './plan-guards.js';
import { isStorageUnavailable } from './storage-errors.js';
import type { Statement } from './statements.js';
import type { Tables } from './types.js';

/** A statement's own bounds and plan: its query timeout (never longer than the pool's). */
export interface StatementOptions {
  queryTimeoutMs?: number;
  /**
   * On PostgreSQL, run in a transaction of its own under STATEMENT_PLANNED_ONCE (db/plan-guards.ts):
   * planned once per connection, and so are its foreign-key checks. Only for a statement whose one
   * sane plan is every index's lookup whatever the statistics (plan tests: plan-states-*).
   */
  plannedOnce?: boolean;
  /**
   * On PostgreSQL, run in a transaction of its own with index scans only (INDEX_SCANS_ONLY in
   * db/plan-guards.ts: no sequential and no bitmap scan), for a read through an index full of dead
   * entries: an index scan marks each dead on its first visit, and later reads skip it.
   */
  indexScansOnly?: boolean;
}

/**
 * Runs a statement: on PostgreSQL in session mode as a named prepared statement (parsed and
 * planned once per connection, not on every call; Kysely cannot name one); in transaction mode
 * unnamed (a named statement lives on one server connection, and the next transaction may get
 * another, or a connection where another client prepared the same name); on PGlite as plain SQL
 * (`plannedOnce` aside: PGlite plans it per call, as before).
 * Given a parent (tracing on), inside a client span named by the statement.
 */
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
  const guarded = guardedPoolOf(db);
  if (!guarded) return (await db.executeQuery<R>(CompiledQuery.raw(statement.text, [...parameters]))).rows;
  const client = await guarded.connect();
  let discard = false;
  try {
    const named = guarded.poolMode === 'session';
    // A statement's own timeout is never longer than the pool's (and bounds its BEGIN and COMMIT too).
    const timeout = options.queryTimeoutMs === undefined ? {} : { query_timeout: Math.min(options.queryTimeoutMs, guarded.queryTimeoutMs) };
    const query = named
      ? { name: statement.name, text: statement.text, values: [...parameters], ...timeout }
      : { text: statement.text, values: [...parameters], ...timeout };
    const guard = options.plannedOnce ? STATEMENT_PLANNED_ONCE : options.indexScansOnly ? INDEX_SCANS_ONLY_SQL : undefined;
    if (guard === undefined) return ((await client.query(query)) as pg.QueryResult<R & pg.QueryResultRow>).rows;
    try {
      // BEGIN and the guard in one round trip (simple protocol), the statement, COMMIT.
      await client.query({ text: `begin; ${guard}`, ...timeout });
      const { rows } = (await client.query(query)) as pg.QueryResult<R & pg.QueryResultRow>;
      await client.query({ text: 'commit', ...timeout });
      return rows;
    } catch (err) {
      // Never hand a connection back inside a transaction: rolled back, or closed (at once where the
      // database is out of reach: a ROLLBACK would wait behind a query that never answers).
      if (isStorageUnavailable(err)) discard = true;
      else await client.query({ text: 'rollback', ...timeout }).catch(() => (discard = true));
      throw err;
    }
  } finally {
    client.release(discard);
  }
}
