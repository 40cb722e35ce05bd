import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Test } from 'tap';
import { TEST_CPF_HASH_KEY, TEST_PARTNER_TOKEN } from './app.js';
import { freshDatabaseUrl, SERVER_URL } from './database.js';
import { type ServerProcess, startProcess } from './process.js';

/**
 * The gateway as `npm start` runs it, listening, on a fresh database (PGlite in a temporary
 * directory without DATABASE_URL), with a provider that refuses connections; `env` adds to it.
 */
export async function startGatewayProcess(t: Test, env: Record<string, string> = {}): Promise<{ server: ServerProcess; base: string }> {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'ugw-process-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const all: Record<string, string> = {
    HOST: '127.0.0.1',
    PORT: '0',
    DATA_DIR: dataDir,
    PROVIDER_BASE_URL: 'http://127.0.0.1:9',
    PARTNER_TOKEN: TEST_PARTNER_TOKEN,
    CPF_HASH_KEY: TEST_CPF_HASH_KEY,
    ...env,
  };
  if (SERVER_URL) all.DATABASE_URL = await freshDatabaseUrl(t);
  const server = startProcess(t, all);
  return { server, base: await server.listening() };
}
