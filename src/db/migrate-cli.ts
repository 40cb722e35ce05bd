import { pino } from 'pino';
import { ConfigError, loadConfig } from '../config.js';
import { loggerOptions } from '../logger.js';
import { openDatabase } from './database.js';
import { migrateToLatest } from './migrator.js';

// `npm run migrate`: apply pending migrations to DATABASE_URL (or the embedded database) and exit.
async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.problems.join('\n')}\n`);
      process.exit(1);
    }
    throw err;
  }
  const log = pino(loggerOptions(config.logLevel));
  const database = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
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
