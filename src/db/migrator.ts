import { promises as fs } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { FileMigrationProvider, Migrator, sql } from 'kysely';
import type { DatabaseHandle } from './handle.js';
import { MIGRATION_LOCK_ID } from './postgres-dialect.js';

// src/db/ -> migrations/, both in the source tree and in dist/.
const MIGRATIONS_DIR = fileURLToPath(new URL('../../migrations', import.meta.url));

export class MigrationError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'MigrationError';
  }
}

/**
 * Applies every pending migration and returns the names applied, all in one transaction that first
 * takes a transaction-scoped advisory lock: instances starting together wait for each other instead
 * of racing, and nothing outlives the transaction (no session lock, so it works behind a
 * transaction-pooling PgBouncer too). A failed migration rolls every one of them back.
 */
export async function migrateToLatest(database: Pick<DatabaseHandle, 'db'>): Promise<string[]> {
  // One connection, one transaction of our own (the migrator's own would start after its lock).
  return database.db.connection().execute(async (conn) => {
    await sql`begin`.execute(conn);
    try {
      // Before the migrator creates its own tables: two instances on a fresh database would race there.
      await sql`select pg_advisory_xact_lock(${sql.lit(MIGRATION_LOCK_ID)})`.execute(conn);
      const migrator = new Migrator({
        db: conn,
        provider: new FileMigrationProvider({ fs, path, migrationFolder: MIGRATIONS_DIR }),
        disableTransactions: true,
      });
      const { error, results } = await migrator.migrateToLatest();
      const failed = results?.find((r) => r.status === 'Error');
      if (error !== undefined) {
        const where = failed ? ` in ${failed.migrationName}` : '';
        throw new MigrationError(`migration failed${where}: ${error instanceof Error ? error.message : String(error)}`, {
          cause: error,
        });
      }
      await sql`commit`.execute(conn);
      return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
    } catch (err) {
      await sql`rollback`.execute(conn).catch(() => {});
      throw err;
    }
  });
}
