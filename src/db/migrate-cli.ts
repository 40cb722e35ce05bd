import { pino } from 'pino';
import { configOrExit } from '../config-error.js';
import { loadConfig } from '../config.js';
import { loggerOptions } from '../logger.js';
import { openDatabase } from './database.js';
import { migrateToLatest } from './migrator.js';

// `npm run migrate`: apply pending migrations to DATABASE_URL (or the embedded database) and exit.
async function main(): Promise<void> {
  const config = await configOrExit(() => loadConfig());
  const log = pino(loggerOptions(config.logLevel));
  const database = await openDatabase({ databaseUrl: config.databaseUrl, poolMode: config.databasePoolMode, dataDir: config.dataDir });
  try {
    const applied = await migrateToLatest(database);
    log.info({ engine: database.engine, applied }, applied.length ? 'migrations applied' : 'database already up to date');
  } finally {
    await database.close();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`migrate: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
