import type { CompiledQuery } from 'kysely';
import t from 'tap';
import { INDEX_LOOKUPS_ONLY } from '../../src/db/plan-guards.js';
import { seedStatsData } from '../../src/stats/sample-data.js';
import { requestBatchQuery, retentionCutoff, strayBatchQuery } from '../../src/retention/sweep.js';
import { strayPageQuery } from '../../src/stats/callbacks.js';
import { BUCKETS_READ_PLANS, bucketsQuery, presentQuery } from '../../src/stats/sql.js';
import { freshDatabase } from '../helpers/database.js';
import { plan } from '../helpers/plan.js';

// The same reads at 1M rows, with timings: bench/investigations/stats-plans.ts (figures in docs/performance-history.md).

const END = new Date('2026-11-23T04:00:00Z');
const DAY = 24 * 3600_000;
const ago = (days: number) => new Date(END.getTime() - days * DAY);

t.test('statistics, the callbacks list and retention read by index on 50k requests over 100 days', async (t) => {
  const { db } = await freshDatabase(t);
  await seedStatsData(db, { requests: 50_000, days: 100, end: END, purgedDays: 60 });

  const indexed: Array<[string, CompiledQuery, RegExp[]]> = [
    ['stats, hour buckets over 24 h', bucketsQuery(ago(1), END, 'hour').compile(db), [/underwriting_requests_list/, /callbacks_stray/, /statistics_hourly_pkey/, /turnaround_hourly_pkey/]],
    ['stats, hour buckets over 7 days', bucketsQuery(ago(7), END, 'hour').compile(db), [/underwriting_requests_list/, /callbacks_stray/]],
    ['stats, now', presentQuery(ago(1)).compile(db), [/Index \w* ?Scan using underwriting_requests_\w+|Bitmap Index Scan on underwriting_requests_\w+/, /callbacks_stray/, /event_deliveries_(due|order)/, /event_deliveries_dead/]],
    ['unmatched callbacks', strayPageQuery({ kind: 'unmatched' }, undefined, 50).compile(db), [/Index Scan( Backward)? using callbacks_stray/]],
    ['invalid callbacks, next page', strayPageQuery({ kind: 'invalid' }, { t: '2026-10-01T00:00:00.000000Z', id: 1 }, 50).compile(db), [/Index Cond: .*ROW\((c\.)?received_at, (c\.)?id\) </]],
    ['both kinds', strayPageQuery({}, undefined, 50).compile(db), [/callbacks_stray/]],
    ['retention, requests', requestBatchQuery(retentionCutoff(END, 30), 500).compile(db), [/underwriting_requests_list/]],
    ['retention, stray callbacks', strayBatchQuery(retentionCutoff(END, 30), 500).compile(db), [/callbacks_stray/]],
  ];
  for (const [name, query, expected] of indexed) {
    // The statistics and retention read as they run: with no sequential scan allowed (src/db/plan-guards.ts).
    const guarded = /^(stats|retention)/.test(name);
    const text = guarded
      ? await db.transaction().execute(async (trx) => {
          await (name.startsWith('stats') ? BUCKETS_READ_PLANS : INDEX_LOOKUPS_ONLY).execute(trx);
          return plan(trx, query);
        })
      : await plan(db, query);
    t.notMatch(text, /Seq Scan on (underwriting_requests|callbacks|statistics_hourly|turnaround_hourly|events|event_deliveries)/, `${name}: no sequential scan\n${text}`);
    for (const pattern of expected) t.match(text, pattern, `${name}: ${pattern}`);
  }
  const page = await plan(db, strayPageQuery({ kind: 'unmatched' }, undefined, 50).compile(db));
  t.notMatch(page, /Sort/, 'a page of one kind comes in index order, unsorted');
});
