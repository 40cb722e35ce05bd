import { mkdir, readdir, rm, rmdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { commandLine } from '../config/cli.js';
import { compareSnapshots, readSnapshots, renderSnapshots, SNAPSHOT_DIR } from './sql-snapshot.js';

// `npm run sql:snapshot`: writes the final text of every named statement and listed builder query
// to sql/<capability>/<name>.sql (docs/layout.md), and removes the files of those that are gone.
async function main(): Promise<void> {
  const args = commandLine({
    command: 'npm run sql:snapshot (node dist/src/db/sql-snapshot-cli.js)',
    summary: 'Writes the SQL snapshots (sql/<capability>/<name>.sql) from the source; needs no database.',
  });
  if (args === undefined) return;
  const expected = await renderSnapshots();
  const { missing, stale, orphaned } = compareSnapshots(expected, await readSnapshots());
  for (const file of [...missing, ...stale]) {
    const target = path.join(SNAPSHOT_DIR, file);
    await mkdir(path.dirname(target), { recursive: true });
    await writeFile(target, expected.get(file)!);
  }
  for (const file of orphaned) {
    await rm(path.join(SNAPSHOT_DIR, file));
    // Its folder goes too once empty.
    const dir = path.dirname(path.join(SNAPSHOT_DIR, file));
    if ((await readdir(dir)).length === 0) await rmdir(dir);
  }
  const changed = [...missing.map((f) => `new      sql/${f}`), ...stale.map((f) => `changed  sql/${f}`), ...orphaned.map((f) => `removed  sql/${f}`)];
  process.stdout.write(`${changed.map((l) => `${l}\n`).join('')}sql:snapshot: ${expected.size} snapshots, ${changed.length} written or removed\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`sql:snapshot: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});
