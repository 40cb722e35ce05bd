import t from 'tap';
import { runStatement } from '../../src/db/run-statement.js';
import { defineStatement } from '../../src/db/statements.js';
import { freshDatabase, SERVER_URL } from '../helpers/database.js';

// runStatement's guards (src/db/plan-guards.ts): a statement run with `indexScansOnly` is planned
// with no sequential and no bitmap scan (the expiry sweep's reads, which must mark the dead entries
// they visit), inside a transaction of its own, and the connection goes back as it was.

const SETTINGS = defineStatement(
  'test_run_statement_settings',
  `select current_setting('enable_seqscan') as seq, current_setting('enable_bitmapscan') as bitmap`,
);

if (!SERVER_URL) {
  t.test('on PGlite (one connection, nothing to mark dead for others) a guarded statement runs as plain SQL', async (t) => {
    const { db } = await freshDatabase(t);
    const [row] = await runStatement<{ seq: string; bitmap: string }>(db, SETTINGS, [], undefined, undefined, { indexScansOnly: true });
    t.match(row, { seq: 'on', bitmap: 'on' });
  });
} else {
  t.test('indexScansOnly runs the statement with sequential and bitmap scans off, in a transaction of its own; the connection goes back as it was', async (t) => {
    const { db } = await freshDatabase(t);
    const [guarded] = await runStatement<{ seq: string; bitmap: string }>(db, SETTINGS, [], undefined, undefined, { indexScansOnly: true });
    // SET LOCAL takes effect only inside a transaction: off here means the statement ran in one.
    t.match(guarded, { seq: 'off', bitmap: 'off' }, 'guarded');
    // The pool has one connection here or several: every one of them reads the defaults again.
    const after = await Promise.all(Array.from({ length: 4 }, () => runStatement<{ seq: string; bitmap: string }>(db, SETTINGS, [])));
    for (const [row] of after) t.match(row, { seq: 'on', bitmap: 'on' }, 'the guard ended with its transaction');
  });
}
