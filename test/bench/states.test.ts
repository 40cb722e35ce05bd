import pg from 'pg';
import t, { type Test } from 'tap';
import { closePastHours, loadInBulk } from '../../bench/lib/states.js';
import { freshDatabaseUrl, SERVER_URL } from '../helpers/database.js';

// The bench states' bulk load (bench/lib/states.ts), PostgreSQL only as the bench is: rows spread
// over days as a deployment's accumulate, and their past hours closed by the gateway's own pass.

if (SERVER_URL) t.test('a bulk load spread over days lies evenly up to now, and its past hours close', async (t) => {
  const url = await freshDatabaseUrl(t, { migrated: true });
  // Ended in the test itself: a teardown runs after the database's own one drops it (with force),
  // and the pool's idle connections would then fail with nobody listening.
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  try {
    await spreadAndClose(t, pool, url);
  } finally {
    await pool.end();
  }
});

async function spreadAndClose(t: Test, pool: pg.Pool, url: string): Promise<void> {
  await loadInBulk(pool, 'spread-', 3_000, 3 * 86_400);
  const { rows: [span] } = await pool.query<{ n: number; completed: number; oldest_h: number; newest_s: number; hours: number }>(
    `select count(*)::int as n, count(*) filter (where status = 'completed')::int as completed,
            extract(epoch from now() - min(submitted_at)) / 3600 as oldest_h,
            extract(epoch from now() - max(submitted_at)) as newest_s,
            count(distinct date_trunc('hour', submitted_at))::int as hours
       from underwriting_requests`,
  );
  t.equal(span!.n, 3_000);
  t.equal(span!.completed, 3_000, 'each completed by its callback, as in an unspread load');
  t.ok(span!.oldest_h > 71.9 && span!.oldest_h < 72.1, `the oldest three days ago (${span!.oldest_h} h)`);
  // Row k of n lies (1 - k / n) of the spread back: the newest one step (86.4 s) before now.
  t.ok(span!.newest_s < (3 * 86_400) / 3_000 + 60, `the newest now, within a step (${span!.newest_s} s ago)`);
  t.ok(span!.hours >= 72, `in every hour of the three days (${span!.hours})`);

  const closed = await closePastHours(url);
  t.ok(closed >= 70 && closed <= 73, `the past hours closed (${closed}), the last half hour's open`);
  const { rows: [aggregated] } = await pool.query<{ hours: number; requests: number }>(
    `select count(*)::int as hours, sum(submitted)::int as requests from statistics_hourly where closed_at is not null`,
  );
  t.equal(aggregated!.hours, closed);
  t.ok(aggregated!.requests > 2_900, `their requests are counted in the closed hours (${aggregated!.requests})`);
  t.equal(await closePastHours(url), 0, 'nothing left to close');
}
