import t from 'tap';
import { busiestStatements, describeStatement } from '../../bench/lib/database.js';

// The bench's per-run view of pg_stat_statements (`--own-postgres`): what changed between two
// snapshots, busiest first.

t.test('a run\'s statements: the change between two snapshots, most execution time first', (t) => {
  const before = new Map([
    ['update a', { calls: 10, execMs: 50, blocks: 100 }],
    ['select b', { calls: 5, execMs: 5, blocks: 10 }],
    ['select idle', { calls: 3, execMs: 9, blocks: 6 }],
  ]);
  const after = new Map([
    ['update a', { calls: 14, execMs: 58, blocks: 140 }],
    ['select b', { calls: 6, execMs: 35, blocks: 2010 }],
    ['select idle', { calls: 3, execMs: 9, blocks: 6 }],
    ['insert new', { calls: 2, execMs: 3, blocks: 4 }],
  ]);
  t.same(busiestStatements(before, after, 4), [
    { query: 'select b', calls: 1, execMs: 30, blocks: 2000 },
    { query: 'update a', calls: 4, execMs: 8, blocks: 40 },
    { query: 'insert new', calls: 2, execMs: 3, blocks: 4 },
  ], 'a statement not run meanwhile is left out; a new one counts whole');
  t.same(busiestStatements(before, after, 1).map((s) => s.query), ['select b'], 'at most `top`');
  t.end();
});

t.test('a statement\'s line: totals, per call, and its text on one line', (t) => {
  const line = describeStatement({ query: 'with due as (\n  select d.id\n  from event_deliveries d)', calls: 4, execMs: 123.4, blocks: 10_000 });
  t.equal(line, '123 ms in 4 calls (30.85 ms, 2500 blocks each): with due as ( select d.id from event_deliveries d)');
  t.end();
});
