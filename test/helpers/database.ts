import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type Kysely, sql } from 'kysely';
import pg from 'pg';
import type { Test } from 'tap';
import { openDatabase } from '../../src/db/database.js';
import type { Tables } from '../../src/db/types.js';
import type { DatabaseHandle } from '../../src/db/handle.js';
import { databaseUrl, forgetTemplate, migratedTemplate, pgliteArchive } from './template.js';
import { timed } from './teardown.js';

/** Set: tests run on this real PostgreSQL server (a database per test file); unset: PGlite. */
export const SERVER_URL = process.env.DATABASE_URL || undefined;
export const ENGINE = SERVER_URL ? 'postgres' : 'pglite';

export interface TestDatabaseHandle extends DatabaseHandle {
  /** The database's own URL (PostgreSQL only), e.g. for a child process or a second instance. */
  url: string | undefined;
}

/**
 * Creates a database on the test server and drops it when the test ends: empty, or with `migrated`
 * a clone of the run's migrated template (CREATE DATABASE ... TEMPLATE).
 */
export async function freshDatabaseUrl(t: Test, options: { migrated?: boolean } = {}): Promise<string> {
  if (!SERVER_URL) throw new Error('freshDatabaseUrl needs DATABASE_URL (a real PostgreSQL)');
  const name = `ugw_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: SERVER_URL });
  await admin.connect();
  try {
    if (!options.migrated) {
      await admin.query(`create database ${name}`);
    } else {
      try {
        await admin.query(`create database ${name} template ${await migratedTemplate(SERVER_URL)}`);
      } catch (err) {
        // 3D000: the template was dropped meanwhile (by a run of other migrations): build it again.
        if ((err as { code?: string }).code !== '3D000') throw err;
        forgetTemplate();
        await admin.query(`create database ${name} template ${await migratedTemplate(SERVER_URL)}`);
      }
    }
  } finally {
    await admin.end();
  }
  t.teardown(() =>
    timed(`drop database ${name}`, async () => {
      const cleanup = new pg.Client({ connectionString: SERVER_URL });
      await cleanup.connect();
      // A pool ended just before (pool.end() resolves once its clients are told to end) may still
      // have a backend finishing: dropped with force then, its client got 57P01 with nobody
      // listening (test/bench/states.test.ts, twice in CI). Its sessions get a moment to end first;
      // one left open (a real leak) is still ended by the drop.
      for (let i = 0; i < 50; i++) {
        const { rows } = await cleanup.query<{ n: number }>('select count(*)::int as n from pg_stat_activity where datname = $1', [name]);
        if (rows[0]!.n === 0) break;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      await cleanup.query(`drop database if exists ${name} with (force)`);
      await cleanup.end();
    }),
  );
  return databaseUrl(SERVER_URL, name);
}

/**
 * A fresh, migrated database for one test: its own PostgreSQL database when DATABASE_URL is set,
 * cloned from the run's migrated template, otherwise an in-memory PGlite loaded from the run's
 * archive of a migrated cluster (of an empty one with `migrate: false`). Closed (and dropped) at teardown.
 */
export async function freshDatabase(t: Test, options: { migrate?: boolean; queryTimeoutMs?: number } = {}): Promise<TestDatabaseHandle> {
  const migrated = options.migrate !== false;
  const url = SERVER_URL ? await freshDatabaseUrl(t, { migrated }) : undefined;
  // PGlite loads an archive of a cluster (migrated or empty) instead of running initdb (docs/testing.md).
  const loadDataDir = url ? undefined : await pgliteArchive(migrated);
  const timeout = options.queryTimeoutMs === undefined ? {} : { queryTimeoutMs: options.queryTimeoutMs };
  const database = await openDatabase({ databaseUrl: url, dataDir: 'memory://', poolSize: 20, loadDataDir, ...timeout });
  t.teardown(() => timed('database.close()', () => database.close()));
  return Object.assign(database, { url });
}

/**
 * Storage for a gateway process (test/helpers/process.ts) that must start on a fresh, migrated
 * database: a temporary DATA_DIR (removed at teardown) and, with DATABASE_URL, a clone of the
 * run's migrated template. On PGlite the directory holds the run's migrated cluster, written by
 * PGlite from the archive the in-process tests load: the child then runs neither initdb nor the
 * migrations, which were 5 of the 7-9 s of CPU a child gateway's start cost on PGlite. Tests of a
 * first start (an empty directory, an empty database) make their own.
 */
export async function migratedStorage(t: Test, prefix = 'ugw-process-'): Promise<{ DATA_DIR: string; DATABASE_URL?: string }> {
  const dataDir = await mkdtemp(path.join(tmpdir(), prefix));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  if (SERVER_URL) return { DATA_DIR: dataDir, DATABASE_URL: await freshDatabaseUrl(t, { migrated: true }) };
  const database = await openDatabase({ databaseUrl: undefined, dataDir, loadDataDir: await pgliteArchive(true) });
  await database.close();
  return { DATA_DIR: dataDir };
}

/**
 * Another connection to the same database, as a second gateway instance would have. On PGlite
 * (one process, one engine) that is the same instance, closed only once.
 *
 * Its LISTEN is its own too: a process shares one listener per connection string, and wakes that
 * listener's waiters itself when it announces. Spelled differently (same database), the other
 * instance hears this one's commits only through PostgreSQL's NOTIFY, as a separate process would.
 */
export async function anotherConnection(t: Test, database: TestDatabaseHandle): Promise<DatabaseHandle> {
  if (!database.url) return { ...database, close: async () => {} };
  const listenUrl = database.url.replace(/^postgres(ql)?:/, (_, ql) => (ql ? 'postgres:' : 'postgresql:'));
  const other = await openDatabase({ databaseUrl: database.url, listenUrl, dataDir: 'memory://' });
  t.teardown(() => other.close());
  return other;
}

/**
 * The database slowed, not failing: a transaction of its own holds `table` in ACCESS EXCLUSIVE
 * mode (on PGlite, its one connection) until release() is called; resolves once the lock is held.
 */
export async function holdTable(db: Kysely<Tables>, table: string): Promise<{ release(): Promise<void> }> {
  let release!: () => void;
  let locked!: () => void;
  const isLocked = new Promise<void>((resolve) => (locked = resolve));
  const holder = db.transaction().execute(async (trx) => {
    await sql`lock table ${sql.table(table)} in access exclusive mode`.execute(trx);
    locked();
    await new Promise<void>((resolve) => (release = resolve));
  });
  await Promise.race([isLocked, holder]);
  return {
    release: async () => {
      release();
      await holder;
    },
  };
}
