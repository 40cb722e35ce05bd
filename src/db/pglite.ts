// Opening the embedded database (PGlite) under DATA_DIR, behind the same handle as PostgreSQL.
import { mkdir, stat } from 'node:fs/promises';
import path from 'node:path';
import type { PGlite } from '@electric-sql/pglite';
import { Kysely, sql } from 'kysely';
import { DEFAULT_QUERY_TIMEOUT_MS, type DatabaseHandle, NO_GENERIC_PLANS } from './handle.js';
import { PGliteDialect } from './pglite-dialect.js';
import { probeWith, withTimeout } from './readiness.js';
import type { Tables } from './types.js';

export async function openPglite(dataDir: string, loadDataDir?: Blob): Promise<DatabaseHandle> {
  // Loaded only when used: a gateway on PostgreSQL never carries the embedded engine's code.
  const { PGlite } = await import('@electric-sql/pglite');
  let pglite: PGlite;
  try {
    if (!dataDir.includes('://')) await makeDirectory(dataDir);
    pglite = await PGlite.create(dataDir, loadDataDir ? { loadDataDir } : {});
  } catch (err) {
    // PGlite's own errors can be bare numbers (ErrnoError 54): say where and what to check.
    const reason = err instanceof Error && err.message ? err.message : `${(err as { name?: string })?.name ?? 'error'} ${(err as { errno?: number })?.errno ?? ''}`.trim();
    throw new Error(`DATA_DIR: the embedded database cannot be opened in ${dataDir} (${reason}); it must be a directory this user can create and write to`, { cause: err });
  }
  // One backend for the process's whole life: its foreign-key checks' plans too.
  await pglite.exec(NO_GENERIC_PLANS);
  const db = new Kysely<Tables>({ dialect: new PGliteDialect({ pglite }) });
  return {
    db,
    notifyDb: db,
    pacingDb: db,
    engine: 'pglite',
    connectionString: undefined,
    listenConnectionString: undefined,
    poolMode: 'session',
    queryTimeoutMs: DEFAULT_QUERY_TIMEOUT_MS,
    onHealth: () => () => {},
    pglite,
    ping: (timeoutMs) => withTimeout(sql`select 1`.execute(db), timeoutMs),
    probe: (timeoutMs) => withTimeout(probeWith(db, timeoutMs), timeoutMs),
    poolStats: () => undefined,
    verifyPoolMode: () => Promise.resolve(),
    close: async () => {
      await db.destroy();
      if (!pglite.closed) await pglite.close();
    },
  };
}

/**
 * mkdir -p, one level at a time: fs.mkdir's recursive mode never returns where mkdir answers ENOENT
 * under an existing parent (DATA_DIR=/proc/nope hung the start).
 */
async function makeDirectory(dir: string): Promise<void> {
  const missing: string[] = [];
  for (let current = path.resolve(dir); ; ) {
    try {
      await stat(current);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      missing.unshift(current);
      const parent = path.dirname(current);
      if (parent === current) break;
      current = parent;
    }
  }
  for (const level of missing) {
    await mkdir(level).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
    });
  }
}
