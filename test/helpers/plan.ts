import { CompiledQuery, type Kysely } from 'kysely';
import type { Tables } from '../../src/db/types.js';

/** The planner's plan of a compiled query (EXPLAIN), as text: PostgreSQL's planner on both engines. */
export async function plan(db: Kysely<Tables>, query: CompiledQuery): Promise<string> {
  const { rows } = await db.executeQuery<{ 'QUERY PLAN': string }>(CompiledQuery.raw(`explain ${query.sql}`, [...query.parameters]));
  return rows.map((r) => r['QUERY PLAN']).join('\n');
}
