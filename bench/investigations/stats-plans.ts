import { CompiledQuery, Kysely, PostgresDialect } from 'kysely';
import type { Tables } from '../../src/db/types.js';
import { requestBatchQuery, retentionCutoff, strayBatchQuery } from '../../src/retention/sweep.js';
import { strayPageQuery } from '../../src/stats/callbacks.js';
import { bucketsQuery, presentQuery } from '../../src/stats/sql.js';
import { createBenchDatabase } from '../lib/database.js';
import { seedStatsData } from '../../src/stats/sample-data.js';

// `npm run build && node dist/bench/investigations/stats-plans.js [--requests=1000000]`: the statistics, callbacks
// list and retention reads on a throwaway database of 1M requests (100 days live, 60 days purged),
// each EXPLAIN ANALYZEd: which scans, how long (best of 3 runs, warm cache). Not a test.

const args = process.argv.slice(2);
const requests = Number(args.find((a) => a.startsWith('--requests='))?.slice(11) ?? 1_000_000);
const adminUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const END = new Date('2026-11-23T04:00:00Z');
const H = 3600_000;
const D = 24 * H;

async function explain(db: Kysely<Tables>, query: CompiledQuery): Promise<{ scans: string[]; ms: number; plan: string }> {
  let best = Infinity;
  let plan = '';
  for (let i = 0; i < 3; i++) {
    const { rows } = await db.executeQuery<{ 'QUERY PLAN': string }>(
      CompiledQuery.raw(`explain (analyze, buffers) ${query.sql}`, [...query.parameters]),
    );
    plan = rows.map((r) => r['QUERY PLAN']).join('\n');
    const ms = Number(/Execution Time: ([\d.]+) ms/.exec(plan)?.[1] ?? NaN);
    best = Math.min(best, ms);
  }
  const scans = [...new Set([...plan.matchAll(/((?:Parallel )?(?:Seq Scan|Index Only Scan|Index Scan|Bitmap Index Scan)(?: Backward)?) (?:using (\w+) )?on (\w+)/g)].map((m) => `${m[1]} ${m[2] ?? ''} on ${m[3]}`.replace('  ', ' ')))];
  return { scans, ms: best, plan };
}

async function main(): Promise<void> {
  const bench = await createBenchDatabase(adminUrl);
  // The bench pool: no statement timeout, the seeding takes minutes.
  const db = new Kysely<Tables>({ dialect: new PostgresDialect({ pool: bench.pool }) });
  try {
    const started = Date.now();
    await seedStatsData(db, { requests, days: 100, end: END, purgedDays: 60 });
    process.stdout.write(`seeded ${requests} requests (100 days) + 60 purged days in ${((Date.now() - started) / 1000).toFixed(0)} s; ${bench.serverVersion.split(' on ')[0]}\n\n`);
    const ago = (ms: number) => new Date(END.getTime() - ms);
    const reads: Array<[string, CompiledQuery]> = [
      ['stats: hour buckets, last 24 h', bucketsQuery(ago(D), END, 'hour').compile(db)],
      ['stats: hour buckets, last 7 days', bucketsQuery(ago(7 * D), END, 'hour').compile(db)],
      ['stats: day buckets, last 30 days', bucketsQuery(ago(30 * D), END, 'day').compile(db)],
      ['stats: day buckets, 160 days (60 purged)', bucketsQuery(ago(160 * D), END, 'day').compile(db)],
      ['stats: now', presentQuery(ago(D)).compile(db)],
      ['callbacks: unmatched, first page', strayPageQuery({ kind: 'unmatched' }, undefined, 50).compile(db)],
      ['callbacks: invalid, a page 50 days back', strayPageQuery({ kind: 'invalid' }, { t: ago(50 * D).toISOString().replace('Z', '000Z'), id: 1 }, 50).compile(db)],
      ['callbacks: both kinds, first page', strayPageQuery({}, undefined, 50).compile(db)],
      ['retention: a batch of requests (RETENTION_DAYS=30)', requestBatchQuery(retentionCutoff(END, 30), 500).compile(db)],
      ['retention: a batch of stray callbacks', strayBatchQuery(retentionCutoff(END, 30), 500).compile(db)],
    ];
    process.stdout.write('| read | scans | best of 3 |\n|---|---|---|\n');
    for (const [name, query] of reads) {
      const { scans, ms } = await explain(db, query);
      process.stdout.write(`| ${name} | ${scans.join('; ')} | ${ms.toFixed(1)} ms |\n`);
      if (args.includes('--plans')) process.stdout.write(`\n${(await explain(db, query)).plan}\n\n`);
    }
  } finally {
    await bench.drop();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`stats-plans failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
