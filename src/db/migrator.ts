import { promises as fs } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { FileMigrationProvider, Migrator } from 'kysely';
import type { Database } from './database.js';

// src/db/ -> migrations/, both in the source tree and in dist/.
const MIGRATIONS_DIR = fileURLToPath(new URL('../../migrations', import.meta.url));

export class MigrationError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'MigrationError';
  }
}

/**
 * Applies every pending migration and returns the names applied. Kysely's migrator takes a
 * PostgreSQL advisory lock, so instances starting together wait for each other instead of racing.
 */
export async function migrateToLatest(database: Pick<Database, 'db'>): Promise<string[]> {
  const migrator = new Migrator({
    db: database.db,
    provider: new FileMigrationProvider({ fs, path, migrationFolder: MIGRATIONS_DIR }),
  });
  const { error, results } = await migrator.migrateToLatest();
  const failed = results?.find((r) => r.status === 'Error');
  if (error !== undefined) {
    const where = failed ? ` in ${failed.migrationName}` : '';
    throw new MigrationError(`migration failed${where}: ${error instanceof Error ? error.message : String(error)}`, {
      cause: error,
    });
  }
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}
