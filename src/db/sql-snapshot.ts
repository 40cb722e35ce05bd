import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { CompiledQuery, DatabaseConnection, Driver, Kysely, QueryResult } from 'kysely';
import { packageRoot } from '../config/package-root.js';
import { compilingAsPostgres, definedStatements, type SqlSnapshot } from './statements.js';
import type { Tables } from './types.js';

// The SQL snapshots (docs/layout.md): the final text of every named statement and of the builder
// queries the capabilities list, one .sql file each under sql/<capability>/, written by
// `npm run sql:snapshot` and compared with the checked-in files by test/db/sql-snapshots.test.ts.

/**
 * The folder the running code is in (src/ run as TypeScript; dist/src/ once built; .tap-build/src/
 * as `npm test` compiles it) and its file extension.
 */
const CODE_ROOT = fileURLToPath(new URL('../', import.meta.url));
const EXTENSION = path.extname(fileURLToPath(import.meta.url));
/** The repository: where src/ and sql/ are, whichever of those folders the code runs from. */
const REPOSITORY = packageRoot();

/** Where the snapshots are checked in. */
export const SNAPSHOT_DIR = path.join(REPOSITORY, 'sql');
const SOURCE_ROOT = path.join(REPOSITORY, 'src');

/** A module that defines a named statement or lists builder queries (as its source text says). */
const DEFINES = /defineStatement\(\s*['"`]|export const SQL_SNAPSHOTS\b/;

async function sourceFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const nested = await Promise.all(
    entries.map((e) => (e.isDirectory() ? sourceFiles(path.join(dir, e.name)) : e.name.endsWith('.ts') ? [path.join(dir, e.name)] : [])),
  );
  return nested.flat().sort();
}

/** A database that compiles as the gateway's dialects do and records each query instead of running it. */
function capturingDatabase(sent: CompiledQuery[], answers: readonly (readonly Record<string, unknown>[])[]): Kysely<Tables> {
  let next = 0;
  const connection: DatabaseConnection = {
    executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
      sent.push(query);
      return Promise.resolve({ rows: [...(answers[next++] ?? [])] as R[] });
    },
    streamQuery() {
      throw new Error('no streaming in an SQL snapshot');
    },
  };
  const driver: Driver = {
    init: async () => {},
    acquireConnection: async () => connection,
    beginTransaction: async () => {},
    commitTransaction: async () => {},
    rollbackTransaction: async () => {},
    releaseConnection: async () => {},
    destroy: async () => {},
  };
  return compilingAsPostgres(driver);
}

/** The text as a file shows it: no common indentation, no trailing spaces, one statement terminator. */
export function layOut(text: string): string {
  const lines = text.replace(/\s+$/, '').split('\n').map((l) => l.replace(/\s+$/, ''));
  while (lines.length > 0 && lines[0] === '') lines.shift();
  const indented = lines.filter((l, i) => l !== '' && (i > 0 || /^\s/.test(l)));
  const indent = Math.min(...indented.map((l) => /^ */.exec(l)![0].length));
  const cut = Number.isFinite(indent) ? indent : 0;
  return `${lines.map((l, i) => (i === 0 && !/^\s/.test(l) ? l : l.slice(cut))).join('\n')};\n`;
}

function snapshotFile(kind: string, source: string, texts: readonly string[]): string {
  return `-- ${kind}, in ${source}. Written by \`npm run sql:snapshot\`: edit the source, then run it.\n\n${texts.map(layOut).join('\n')}`;
}

/**
 * Every snapshot as it should read, by path under sql/: the modules that define named statements
 * or list builder queries are found by their source text, so a new one is never left out.
 */
export async function renderSnapshots(): Promise<Map<string, string>> {
  const files = new Map<string, string>();
  const put = (file: string, text: string) => {
    if (files.has(file)) throw new Error(`two SQL snapshots would be written to sql/${file}`);
    files.set(file, text);
  };
  const listed: Array<{ module: string; snapshots: readonly SqlSnapshot[] }> = [];
  for (const file of await sourceFiles(SOURCE_ROOT)) {
    if (!DEFINES.test(await readFile(file, 'utf8'))) continue;
    const module = path.relative(SOURCE_ROOT, file).replace(/\.ts$/, '');
    const exports = (await import(pathToFileURL(path.join(CODE_ROOT, `${module}${EXTENSION}`)).href)) as { SQL_SNAPSHOTS?: readonly SqlSnapshot[] };
    if (exports.SQL_SNAPSHOTS) listed.push({ module, snapshots: exports.SQL_SNAPSHOTS });
  }
  const named = new Set<string>();
  for (const { statement, module: defined } of definedStatements()) {
    // A stack frame names the compiled module, or under source maps its TypeScript source.
    const file = defined === undefined ? undefined : [CODE_ROOT, SOURCE_ROOT].map((root) => path.relative(root, defined)).find((f) => !f.startsWith('..'));
    if (file === undefined) continue;
    const module = file.replace(/\.[jt]s$/, '');
    named.add(statement.text);
    put(`${path.dirname(module)}/${statement.name}.sql`, snapshotFile(`Named statement ${statement.name}`, `src/${module}.ts`, [statement.text]));
  }
  for (const { module, snapshots } of listed) {
    for (const snapshot of snapshots) {
      const sent: CompiledQuery[] = [];
      await snapshot.run(capturingDatabase(sent, snapshot.rows ?? []));
      // A named statement a function runs is in its own file already.
      const texts = sent.map((q) => q.sql).filter((text) => !named.has(text));
      if (texts.length === 0) throw new Error(`the SQL snapshot ${snapshot.name} of src/${module}.ts sent no query of its own`);
      put(`${path.dirname(module)}/${snapshot.name}.sql`, snapshotFile(`Query ${snapshot.name} (builder)`, `src/${module}.ts`, texts));
    }
  }
  return new Map([...files].sort(([a], [b]) => a.localeCompare(b)));
}

/** The .sql files under sql/ as they are, by path under it. */
export async function readSnapshots(dir = SNAPSHOT_DIR): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  const walk = async (at: string): Promise<void> => {
    let entries;
    try {
      entries = await readdir(at, { withFileTypes: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw err;
    }
    for (const e of entries) {
      const full = path.join(at, e.name);
      if (e.isDirectory()) await walk(full);
      else if (e.name.endsWith('.sql')) found.set(path.relative(dir, full).split(path.sep).join('/'), await readFile(full, 'utf8'));
    }
  };
  await walk(dir);
  return found;
}

export interface SnapshotDifferences {
  /** To be written: no file yet. */
  missing: string[];
  /** Written from an older source. */
  stale: string[];
  /** Of a statement or query that is gone. */
  orphaned: string[];
}

export function compareSnapshots(expected: ReadonlyMap<string, string>, found: ReadonlyMap<string, string>): SnapshotDifferences {
  return {
    missing: [...expected.keys()].filter((f) => !found.has(f)),
    stale: [...expected].filter(([f, text]) => found.has(f) && found.get(f) !== text).map(([f]) => f),
    orphaned: [...found.keys()].filter((f) => !expected.has(f)),
  };
}
