import type { Test } from 'tap';
import { TEST_CPF_HASH_KEY, TEST_PARTNER_TOKEN } from './app.js';
import { migratedStorage } from './database.js';
import { type ServerProcess, startProcess } from './process.js';

/**
 * The gateway as `npm start` runs it, listening, on a fresh, migrated database (PGlite in a
 * temporary directory without DATABASE_URL: migratedStorage), with a provider that refuses
 * connections; `env` adds to it.
 */
export async function startGatewayProcess(t: Test, env: Record<string, string> = {}): Promise<{ server: ServerProcess; base: string }> {
  const all: Record<string, string> = {
    HOST: '127.0.0.1',
    PORT: '0',
    ...(await migratedStorage(t)),
    PROVIDER_BASE_URL: 'http://127.0.0.1:9',
    PARTNER_TOKEN: TEST_PARTNER_TOKEN,
    CPF_HASH_KEY: TEST_CPF_HASH_KEY,
    ...env,
  };
  const server = startProcess(t, all);
  return { server, base: await server.listening() };
}
