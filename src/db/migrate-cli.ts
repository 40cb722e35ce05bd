import { commandLine } from '../config/cli.js';
import { configOrExit, writeFatal } from '../config/config-error.js';
import { unknownVariableWarnings } from '../config/config-names.js';
import { loadDatabaseConfig } from '../config/config.js';
import { loadEnvFile } from '../config/env-file.js';
import { createLogger, logProcessWarnings } from '../observability/logger.js';
import { openDatabase } from './database.js';
import { migrateToLatest } from './migrator.js';

// `npm run migrate`: apply pending migrations to DATABASE_URL (or the embedded database) and exit.
// It reads the database's settings only: a migration Job needs no provider token or other secret.
async function main(): Promise<void> {
  const args = commandLine({
    command: 'npm run migrate (node dist/src/db/migrate-cli.js)',
    summary: 'Applies pending migrations to DATABASE_URL (or the embedded database under DATA_DIR) and exits.',
    details: ['Reads only NODE_ENV, DATABASE_URL (or DATABASE_URL_FILE), DATABASE_POOL_MODE, DATA_DIR, LOG_LEVEL and LOG_FORMAT.'],
  });
  if (args === undefined) return;
  await configOrExit(() => loadEnvFile());
  const config = await configOrExit(() => loadDatabaseConfig(), unknownVariableWarnings(process.env));
  const log = createLogger(config.logLevel, config.logFormat ?? 'json');
  logProcessWarnings(log, config.logFormat ?? 'json', config.databaseUrl === undefined ? [] : [config.databaseUrl]);
  for (const warning of unknownVariableWarnings(process.env)) log.warn(warning);
  const database = await openDatabase({ databaseUrl: config.databaseUrl, poolMode: config.databasePoolMode, dataDir: config.dataDir });
  try {
    const applied = await migrateToLatest(database);
    log.info({ engine: database.engine, applied }, applied.length ? 'migrations applied' : 'database already up to date');
  } finally {
    await database.close();
  }
}

main().catch((err: unknown) => {
  writeFatal([`migrate: ${err instanceof Error ? err.message : String(err)}`]);
  process.exit(1);
});
