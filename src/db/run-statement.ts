import type { Link } from '@opentelemetry/api';
import { CompiledQuery, type Kysely } from 'kysely';
import type pg from 'pg';
import { inStatementSpan, type SpanParent } from '../tracing/spans.js';
import { guardedPoolOf } from './guarded-pool.js';
import type { Statement } from './statements.js';
import type { Tables } from './types.js';

/** A statement's own bounds: its query timeout (never longer than the pool's). */
export interface StatementOptions {
  queryTimeoutMs?: number;
}

/**
 * Runs a statement: on PostgreSQL in session mode as a named prepared statement (parsed and
 * planned once per connection, not on every call; Kysely cannot name one); in transaction mode
 * unnamed (a named statement lives on one server connection, and the next transaction may get
 * another, or a connection where another client prepared the same name); on PGlite as plain SQL.
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
