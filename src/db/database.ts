// Opens the gateway's database: PostgreSQL when DATABASE_URL is set, else the embedded PGlite.
import type { DatabaseHandle, OpenDatabaseOptions } from './handle.js';
import { openPglite } from './pglite.js';
import { openPostgres } from './postgres.js';

export async function openDatabase(options: OpenDatabaseOptions): Promise<DatabaseHandle> {
  if (options.databaseUrl) return openPostgres(options.databaseUrl, options);
  return openPglite(options.dataDir, options.loadDataDir);
}
