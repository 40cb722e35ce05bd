import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Driver, DummyDriver, Kysely, PostgresAdapter, PostgresIntrospector, PostgresQueryCompiler } from 'kysely';
import type { Tables } from './types.js';

declare const defined: unique symbol;

/**
 * A hot statement written once as SQL; its name must be unique in the process. Made only by
 * defineStatement, so that every one is in the registry the SQL snapshots are written from.
 */
export interface Statement {
  readonly name: string;
  readonly text: string;
  readonly [defined]: true;
}

/** A defined statement and the file of the module that defined it. */
export interface DefinedStatement {
  statement: Statement;
  module: string | undefined;
}

const registry = new Map<string, DefinedStatement>();
// This module's frames, whether they name it compiled (dist/src/db/statements.js, .tap-build/src/...)
// or, under source maps, as its TypeScript source (src/db/statements.ts).
const HERE = `${path.sep}${path.join('src', 'db', 'statements')}`;

/** The file of the module that called defineStatement: the first stack frame outside this file. */
function callerModule(): string | undefined {
  // Frames name a file by URL (node) or by path (under tsx's source maps).
  for (const match of (new Error().stack ?? '').matchAll(/(file:\/\/[^\s)]+?|\/[^\s):]+?):\d+:\d+/g)) {
    const file = match[1]!.startsWith('file:') ? fileURLToPath(match[1]!) : match[1]!;
    if (!file.replace(/\.[jt]s$/, '').endsWith(HERE)) return file;
  }
  return undefined;
}

/**
 * A CTE (`not_waited`) that makes its statement's transaction commit without waiting for the WAL
 * flush (synchronous_commit off for that transaction alone): for writes a database crash may take
 * back without harm, where the wait would hold a contended row lock, or queue behind other commits'
 * flushes, for nothing (docs/provider-pacing.md, "What a forward costs"). Reference it in the
 * statement's final select (a select CTE nothing reads is never run).
 */
export const NOT_WAITED_TO_DISK = `not_waited as (select set_config('synchronous_commit', 'off', true) as off)`;

/** Defines (and registers) a named statement; two different statements under one name throw. */
export function defineStatement(name: string, text: string): Statement {
  const known = registry.get(name);
  if (known) {
    if (known.statement.text !== text) throw new Error(`two different statements are named ${name}`);
    return known.statement;
  }
  const statement = { name, text } as Statement;
  registry.set(name, { statement, module: callerModule() });
  return statement;
}

/** Every statement defined so far (by the modules imported so far). */
export function definedStatements(): DefinedStatement[] {
  return [...registry.values()];
}

/** A Kysely that compiles as the gateway's own dialects do (PostgreSQL's) and sends to `driver`. */
export function compilingAsPostgres(driver: Driver): Kysely<Tables> {
  return new Kysely<Tables>({
    dialect: {
      createAdapter: () => new PostgresAdapter(),
      createDriver: () => driver,
      createIntrospector: (db) => new PostgresIntrospector(db),
      createQueryCompiler: () => new PostgresQueryCompiler(),
    },
  });
}

/** A Kysely that compiles and never connects: a builder query's text for a named statement. */
export const compileOnly = compilingAsPostgres(new DummyDriver());

/**
 * A query built by the builder or a `sql` template, as `npm run sql:snapshot` writes it: `run`
 * calls the capability's own function on a database that records what it is sent (answering each
 * query with the next of `rows`, else no rows). Listed in the module's exported SQL_SNAPSHOTS.
 */
export interface SqlSnapshot {
  name: string;
  run(db: Kysely<Tables>): Promise<unknown>;
  rows?: readonly (readonly Record<string, unknown>[])[];
}
