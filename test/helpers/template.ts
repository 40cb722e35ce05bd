import { createHash, randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { openDatabase } from '../../src/db/database.js';
import { migrateToLatest } from '../../src/db/migrator.js';
import { ROOT } from './root.js';

// One migrated database per run, cloned for every test that wants a migrated one: migrating anew
// each time cost about half a second on PostgreSQL and more on PGlite, for each of 160 databases.
// Named after what it was built from, so a changed migration never reuses a stale template.

/** Another run's template (other migrations) is dropped once it is this old: it may still be in use. */
const STALE_AFTER_MS = 60 * 60_000;

/** sha256 (12 hex) of the migrations folder's files and the migrator, plus the given extra text. */
export function migrationsDigest(extra = ''): string {
  const hash = createHash('sha256');
  const dir = path.join(ROOT, 'migrations');
  for (const name of readdirSync(dir).sort()) hash.update(`${name}\0`).update(readFileSync(path.join(dir, name))).update('\0');
  hash.update(readFileSync(path.join(ROOT, 'src/db/migrator.ts'))).update(extra);
  return hash.digest('hex').slice(0, 12);
}

/** The same server, another database. */
export function databaseUrl(serverUrl: string, name: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

const BUILT = 'ugw test template, built at ';

async function dropDatabase(admin: pg.Client, name: string): Promise<void> {
  await admin.query(`alter database ${name} is_template false`).catch(() => {});
  await admin.query(`drop database if exists ${name} with (force)`);
}

/** Templates and unfinished builds of other migrations, older than STALE_AFTER_MS. */
async function dropStaleTemplates(admin: pg.Client, keep: string): Promise<void> {
  const { rows } = await admin.query<{ datname: string; comment: string | null }>(
    `select datname, shobj_description(oid, 'pg_database') as comment from pg_database
      where (datname like 'ugw\\_template\\_%' or datname like 'ugw\\_tbuild\\_%') and datname <> $1`,
    [keep],
  );
  for (const { datname, comment } of rows) {
    const built = comment?.startsWith(BUILT) ? Number(comment.slice(BUILT.length)) : 0;
    if (Date.now() - built > STALE_AFTER_MS) await dropDatabase(admin, datname);
  }
}

/**
 * Creates (once per migrations digest, whatever the number of test processes) a migrated template
 * database on the server and returns its name. Built under a name of its own and renamed when
 * complete, so a template by the final name is always whole; an advisory lock keeps a run's
 * processes from building it twice.
 */
async function buildPostgresTemplate(serverUrl: string): Promise<string> {
  const digest = migrationsDigest();
  const name = `ugw_template_${digest}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    await admin.query('select pg_advisory_lock($1)', [Number.parseInt(digest.slice(0, 8), 16)]);
    await dropStaleTemplates(admin, name);
    const existing = await admin.query('select 1 from pg_database where datname = $1', [name]);
    if (existing.rowCount) return name;
    const build = `ugw_tbuild_${digest}_${randomBytes(4).toString('hex')}`;
    await admin.query(`create database ${build}`);
    try {
      await admin.query(`comment on database ${build} is '${BUILT}${Date.now()}'`);
      const database = await openDatabase({ databaseUrl: databaseUrl(serverUrl, build), dataDir: 'unused', poolSize: 1 });
      try {
        await migrateToLatest(database);
      } finally {
        await database.close();
      }
      await admin.query(`alter database ${build} is_template true`);
      await admin.query(`alter database ${build} rename to ${name}`);
    } catch (err) {
      await dropDatabase(admin, build);
      // Another run (on another database of this server, outside our lock) finished it first.
      if ((err as { code?: string }).code === '42P04') return name;
      throw err;
    }
    return name;
  } finally {
    await admin.end();
  }
}

let postgresTemplate: Promise<string> | undefined;

/** The migrated template's name on this server, built at the first call of the run. */
export function migratedTemplate(serverUrl: string): Promise<string> {
  postgresTemplate ??= buildPostgresTemplate(serverUrl);
  postgresTemplate.catch(() => {
    postgresTemplate = undefined;
  });
  return postgresTemplate;
}

/** After a clone found the template gone (dropped by a run with other migrations): build it again. */
export function forgetTemplate(): void {
  postgresTemplate = undefined;
}

/**
 * A PGlite data directory (PGlite's dumpDataDir archive), migrated or empty, kept in the temporary
 * directory for every test process of the run and the next runs: loading one costs about a fifth
 * of the CPU of initdb, which PGlite otherwise runs for every new database.
 */
async function buildPgliteArchive(migrated: boolean): Promise<Blob> {
  const { version } = JSON.parse(await readFile(path.join(ROOT, 'node_modules/@electric-sql/pglite/package.json'), 'utf8')) as { version: string };
  const file = path.join(tmpdir(), `ugw-test-pglite-${migrated ? 'migrated' : 'empty'}-${migrationsDigest(version)}.tar`);
  try {
    return new Blob([await readFile(file)]);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  for (const other of await readdir(tmpdir())) {
    if (!other.startsWith('ugw-test-pglite-') || path.join(tmpdir(), other) === file) continue;
    const stale = path.join(tmpdir(), other);
    const { mtimeMs } = await stat(stale).catch(() => ({ mtimeMs: Date.now() }));
    if (Date.now() - mtimeMs > STALE_AFTER_MS) await rm(stale, { force: true });
  }
  const database = await openDatabase({ databaseUrl: undefined, dataDir: 'memory://' });
  let archive: Blob;
  try {
    if (migrated) await migrateToLatest(database);
    // Dumped while running: a checkpoint first, so that each load replays almost no WAL.
    await database.pglite!.exec('checkpoint');
    archive = await database.pglite!.dumpDataDir('none');
  } finally {
    await database.close();
  }
  // Written whole under another name, then renamed: a process reading it never sees half of it.
  const partial = `${file}.${process.pid}.${randomBytes(4).toString('hex')}`;
  await writeFile(partial, Buffer.from(await archive.arrayBuffer()));
  await rename(partial, file);
  return archive;
}

const pgliteArchives = new Map<boolean, Promise<Blob>>();

/** The migrated (or empty) PGlite archive, read or built once per test process. */
export function pgliteArchive(migrated: boolean): Promise<Blob> {
  let archive = pgliteArchives.get(migrated);
  if (!archive) {
    archive = buildPgliteArchive(migrated);
    pgliteArchives.set(migrated, archive);
    archive.catch(() => pgliteArchives.delete(migrated));
  }
  return archive;
}
