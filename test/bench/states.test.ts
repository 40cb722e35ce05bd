import pg from 'pg';
import t, { type Test } from 'tap';
import { closePastHours, configuredEndpoints, loadInBulk } from '../../bench/lib/states.js';
import { openDatabase } from '../../src/db/database.js';
import { expireOverdue } from '../../src/requests/expiry.js';
import { freshDatabaseUrl, SERVER_URL } from '../helpers/database.js';
import { until } from '../helpers/until.js';

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

if (SERVER_URL) t.test('a push state\'s bulk history was pushed as it happened: delivered, nothing due at once', async (t) => {
  const url = await freshDatabaseUrl(t, { migrated: true });
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  try {
    // As a gateway with EVENT_WEBHOOK_URLS registers its configured endpoint at start.
    await pool.query(
      `insert into event_endpoints (id, key, managed, url, shown_url, created_at, updated_at)
       values ('ep_bench', 'ck_bench', 'config', 'http://127.0.0.1:9/hook', 'http://127.0.0.1:9/hook', now(), now())`,
    );
    const pushed = await configuredEndpoints(pool);
    t.same(pushed, [{ key: 'ck_bench', url: 'http://127.0.0.1:9/hook' }]);
    await loadInBulk(pool, 'pushed-', 1_200, 86_400, pushed);
    const { rows: [d] } = await pool.query<{ events: number; deliveries: number; delivered: number; due: number; leased: number; per_event_max: number }>(
      `select (select count(*)::int from events) as events,
              count(*)::int as deliveries,
              count(*) filter (where status = 'delivered' and attempts = 1 and delivered_at is not null and last_status = 200)::int as delivered,
              count(*) filter (where status = 'pending')::int as due,
              count(*) filter (where lease_token is not null)::int as leased,
              (select max(n)::int from (select count(*) as n from event_deliveries group by event_id) x) as per_event_max
         from event_deliveries where url_key = 'ck_bench'`,
    );
    t.equal(d!.events, 1_200);
    t.equal(d!.deliveries, 1_200, 'one delivery per event');
    t.equal(d!.delivered, 1_200, 'each delivered, as a worker leaves it');
    t.equal(d!.due, 0, 'no backlog');
    t.equal(d!.leased, 0, 'no lease left behind');
    t.equal(d!.per_event_max, 1);
    // Without endpoints, no delivery is written (push off).
    await loadInBulk(pool, 'unpushed-', 100);
    const { rows: [n] } = await pool.query<{ n: number }>(`select count(*)::int as n from event_deliveries`);
    t.equal(n!.n, 1_200);
  } finally {
    await pool.end();
  }
});

// The bench loads while the gateway runs (state c's and d's history, after its start): its expiry
// sweep must never see a loaded request waiting. It did between a chunk's statements (bursts of
// 21-22 expired in a 1M load), and those were never completed. Here the load is held between them
// (its insert into callbacks waits for a lock the test holds) while a sweep pass runs.
if (SERVER_URL) t.test("a running gateway's expiry sweep never sees a bulk load's requests waiting", async (t) => {
  const url = await freshDatabaseUrl(t, { migrated: true });
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  const holder = new pg.Client({ connectionString: url });
  await holder.connect();
  const gateway = await openDatabase({ databaseUrl: url, dataDir: 'memory://', poolSize: 1 });
  try {
    await holder.query('begin');
    await holder.query('lock table callbacks in share mode');
    // Three days back: all but the last hour's older than the callback timeout (1 h).
    const load = loadInBulk(pool, 'raced-', 3_000, 3 * 86_400);
    load.catch(() => undefined);
    await until(async () => {
      const { rows } = await holder.query<{ n: number }>(`select count(*)::int as n from pg_locks where relation = 'callbacks'::regclass and not granted`);
      return rows[0]!.n > 0;
    }, 20_000, "the load waiting for its callbacks' lock");
    const expired = await expireOverdue(gateway.db, new Date(), 3_600);
    t.equal(expired.length, 0, 'the sweep found none of the loaded requests waiting');
    await holder.query('commit');
    await load;
    const { rows: [n] } = await pool.query<{ completed: number; expired: number }>(
      `select count(*) filter (where status = 'completed')::int as completed, count(*) filter (where status = 'expired')::int as expired from underwriting_requests`,
    );
    t.same(n, { completed: 3_000, expired: 0 }, 'each loaded request completed by its callback');
  } finally {
    await holder.end();
    await gateway.close();
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
