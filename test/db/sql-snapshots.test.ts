import t from 'tap';
import { defineStatement, type Statement } from '../../src/db/statements.js';
import { compareSnapshots, layOut, readSnapshots, renderSnapshots } from '../../src/db/sql-snapshot.js';
import { RECORD_RESULTS } from '../../src/requests/complete.js';

// The checked-in SQL (sql/<capability>/<name>.sql, docs/layout.md) is what the code sends: a change
// to a statement or a listed builder query shows in review as a diff of plain SQL.

t.test('every SQL snapshot is written and up to date', async (t) => {
  const expected = await renderSnapshots();
  const differences = compareSnapshots(expected, await readSnapshots());
  t.same(
    differences,
    { missing: [], stale: [], orphaned: [] },
    'the SQL snapshots under sql/ are stale or missing: run `npm run sql:snapshot` and commit sql/',
  );
  for (const name of ['db/readiness_probe', 'events/claim_event_deliveries', 'queries/read_customer', 'requests/record_results', 'requests/expire_submitted']) {
    t.ok(expected.has(`${name}.sql`), `the named statement ${name} is found where its module is`);
  }
  t.ok(expected.has('events/read_feed.sql'), 'a listed builder query is written');
  t.ok(expected.get('requests/record_results.sql')?.endsWith(layOut(RECORD_RESULTS.text)), 'a named statement is written as it is sent');
  t.notOk(
    [...expected.keys()].some((f) => f.startsWith('events/') && expected.get(f)!.includes('pg_snapshot_xip') && f !== 'events/feed_horizon.sql'),
    'a named statement a builder function runs first is left to its own file',
  );
});

t.test('a missing, stale or orphaned snapshot is told apart', (t) => {
  const expected = new Map([
    ['a/new.sql', 'select 1;\n'],
    ['a/changed.sql', 'select 2;\n'],
    ['a/same.sql', 'select 3;\n'],
  ]);
  const found = new Map([
    ['a/changed.sql', 'select 20;\n'],
    ['a/same.sql', 'select 3;\n'],
    ['a/gone.sql', 'select 4;\n'],
  ]);
  t.same(compareSnapshots(expected, found), { missing: ['a/new.sql'], stale: ['a/changed.sql'], orphaned: ['a/gone.sql'] });
  t.end();
});

t.test('a statement is made only by defineStatement, and one name means one statement', (t) => {
  // @ts-expect-error: a literal is no Statement, so none escapes the registry the snapshots read
  const literal: Statement = { name: 'ugw_test_literal', text: 'select 1' };
  t.ok(literal);
  const once = defineStatement('ugw_test_once', 'select 1');
  t.equal(defineStatement('ugw_test_once', 'select 1'), once, 'the same statement again is the same');
  t.throws(() => defineStatement('ugw_test_once', 'select 2'), /two different statements are named ugw_test_once/);
  t.end();
});

t.test('a snapshot is laid out without the source\'s indentation', (t) => {
  t.equal(layOut('\n      select 1\n        from x\n      where y  \n    '), 'select 1\n  from x\nwhere y;\n');
  t.equal(layOut('insert into x\n     (a)\n   values ($1)'), 'insert into x\n  (a)\nvalues ($1);\n');
  t.end();
});
