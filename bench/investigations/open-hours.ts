import { type Kysely, sql } from 'kysely';
import { closingPass } from '../../src/aggregates/closing.js';
import { openDatabase } from '../../src/db/database.js';
import type { Tables } from '../../src/db/types.js';
import { readBuckets } from '../../src/stats/sql.js';
import { createBenchDatabase } from '../lib/database.js';

// `npm run build && node dist/bench/investigations/open-hours.js [--requests=200000]`: the 24-hour
// statistics read over open hours before and after a closing pass folds them (migration 0028,
// docs/performance.md "Open hours"). A throwaway database: `requests` spread over the last 3 hours
// up to 11 minutes ago (below the pass's watermark), inserted `submitting`, then `submitted`, then
// 95% completed and 5% expired (three versions each, as the API leaves them), one more awaiting its
// callback in each past hour so that none can close; never analysed, never vacuumed. Best and worst
// of 5 reads, and each pass's time. Not a test.

const args = process.argv.slice(2);
const requests = Number(args.find((a) => a.startsWith('--requests='))?.slice(11) ?? 200_000);
const adminUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const H = 3600_000;
const say = (line: string) => process.stdout.write(`${line}\n`);

async function seed(db: Kysely<Tables>): Promise<void> {
  await sql`
    insert into underwriting_requests (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, status, submitted_at, updated_at)
    select 'c' || g, md5('c' || g), '***.456.789-**', false, 'submitting', x.at, x.at
      from generate_series(0, ${requests}::int - 1) g
      cross join lateral (select now() - interval '3 hours' + g * ((interval '3 hours' - interval '11 minutes') / ${requests}::int) as at) x`.execute(db);
  await sql`update underwriting_requests set status = 'submitted', upstream_status = 202`.execute(db);
  await sql`update underwriting_requests set status = 'completed', decision = 'approved', completed_at = submitted_at + interval '2 seconds' where id % 20 <> 0`.execute(db);
  await sql`update underwriting_requests set status = 'expired' where id % 20 = 0`.execute(db);
  await sql`
    insert into underwriting_requests (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, status, submitted_at, updated_at, upstream_status)
    select 'w' || g, md5('w' || g), '***.456.789-**', false, 'submitted', date_trunc('hour', now()) - g * interval '1 hour' + interval '20 minutes', now(), 202
      from generate_series(1, 3) g`.execute(db);
}

async function main(): Promise<void> {
  const bench = await createBenchDatabase(adminUrl);
  const handle = await openDatabase({ databaseUrl: bench.url, dataDir: 'memory://', poolSize: 1 });
  try {
    await sql`set statement_timeout = 0`.execute(handle.db);
    await seed(handle.db);
    const hour = Math.floor(Date.now() / H) * H;
    const reads = async (label: string) => {
      const ms: number[] = [];
      for (let i = 0; i < 5; i++) {
        const started = performance.now();
        await readBuckets(handle.db, new Date(hour - 23 * H), new Date(hour + H), 'hour');
        ms.push(performance.now() - started);
      }
      ms.sort((a, b) => a - b);
      say(`${label}: 24 h by hour ${ms[0]!.toFixed(1)}-${ms[4]!.toFixed(1)} ms`);
    };
    const pass = async (label: string) => {
      const started = performance.now();
      await closingPass(handle.db, new Date());
      say(`${label}: ${(performance.now() - started).toFixed(0)} ms`);
    };
    say(`${requests} requests over the last 3 h, ${bench.serverVersion.split(' on ')[0]}`);
    await reads('before any pass');
    await pass('first pass');
    await reads('after it');
    await pass('second pass');
    const { rows } = await sql<{ hour: Date; folded_until: Date | null; listed: string }>`
      select hour, folded_until, (select count(*) from statistics_unfolded u where u.hour = s.hour)::text as listed
        from statistics_hourly s where closed_at is null order by hour`.execute(handle.db);
    for (const r of rows) say(`open hour ${r.hour.toISOString()}: folded to ${r.folded_until?.toISOString() ?? '-'}, ${r.listed} listed`);
  } finally {
    await handle.close();
    await bench.drop();
  }
}

await main();
