import { sql } from 'kysely';
import { openDatabase } from '../../src/db/database.js';
import { BUCKETS_READ_PLANS, bucketsQuery } from '../../src/stats/sql.js';
import { createBenchDatabase } from '../lib/database.js';

// `npm run build && node dist/bench/investigations/open-tail.js [--requests=180000]`: what the
// 24-hour statistics read costs for the unfolded tail of the current hour (the last FOLD_AFTER_MS +
// CLOSING_INTERVAL_MS, read row by row: docs/performance.md "Open hours"). A throwaway database:
// `requests` over the last 150 s, inserted `submitting`, then `submitted`, then `completed` (three
// versions each, as the API leaves them), never analysed, never vacuumed, no pass run. Three reads
// with explain (analyze, buffers), under the read's plan guard (BUCKETS_READ_PLANS; --before: only
// sequential scans off, as until 2026-12-06). With --analysed-at=N,
// the first N requests are inserted and the table analysed (and vacuumed) before the rest: state c,
// statistics from when it was small. Not a test.

const args = process.argv.slice(2);
const requests = Number(args.find((a) => a.startsWith('--requests='))?.slice(11) ?? 180_000);
const analysedAt = Number(args.find((a) => a.startsWith('--analysed-at='))?.slice(14) ?? 0);
/** --before: sequential scans off only, as the read ran before 2026-12-06 (BUCKETS_READ_PLANS since). */
const guard = !args.includes('--before');
const adminUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const H = 3600_000;
const say = (line: string) => process.stdout.write(`${line}\n`);

async function main(): Promise<void> {
  const bench = await createBenchDatabase(adminUrl);
  const handle = await openDatabase({ databaseUrl: bench.url, dataDir: 'memory://', poolSize: 1 });
  try {
    const { db } = handle;
    const insert = (from: number, to: number) => sql`
      insert into underwriting_requests (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, status, submitted_at, updated_at)
      select 'c' || g, md5('c' || g), '***.456.789-**', false, 'submitting', x.at, x.at
        from generate_series(${from}::int, ${to}::int - 1) g
        cross join lateral (select now() - interval '150 seconds' + g * (interval '140 seconds' / ${requests}::int) as at) x`.execute(db);
    const answer = async () => {
      await sql`update underwriting_requests set status = 'submitted', upstream_status = 202 where status = 'submitting'`.execute(db);
      await sql`update underwriting_requests set status = 'completed', decision = 'approved', completed_at = submitted_at + interval '2 seconds' where status = 'submitted'`.execute(db);
    };
    if (analysedAt > 0) {
      await insert(0, analysedAt);
      await answer();
      await bench.pool.query('vacuum analyze');
    }
    await insert(analysedAt, requests);
    await answer();
    const until = new Date(Math.ceil(Date.now() / H) * H);
    const query = bucketsQuery(new Date(until.getTime() - 24 * H), until, 'hour').compile(db);
    const client = await bench.pool.connect();
    try {
      for (let i = 0; i < 3; i++) {
        await client.query('begin');
        await client.query(guard ? BUCKETS_READ_PLANS.compile(db).sql : 'set local enable_seqscan = off');
        const started = performance.now();
        const { rows } = await client.query<{ 'QUERY PLAN': string }>(`explain (analyze, buffers) ${query.sql}`, [...query.parameters]);
        await client.query('commit');
        const plan = rows.map((r) => r['QUERY PLAN']);
        say(`read ${i + 1}: ${(performance.now() - started).toFixed(1)} ms; ${plan.find((l) => l.includes('Execution Time'))?.trim()}; ${plan.find((l) => l.includes('Buffers'))?.trim()}`);
        if (i === 0) for (const line of plan.filter((l) => /Scan.* on underwriting_requests/.test(l))) say(`  ${line.trim()}`);
      }
    } finally {
      client.release();
    }
  } finally {
    await handle.close();
    await bench.drop();
  }
}

await main();
