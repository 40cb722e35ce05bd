import { sql } from 'kysely';
import t from 'tap';
import { loadConfig } from '../../src/config/config.js';
import { PACING_POOL_SIZE } from '../../src/db/handle.js';
import { MAX_URL_SERIES } from '../../src/stats/metrics.js';
import { buildTestApp } from '../helpers/app.js';
import { freshDatabase, SERVER_URL } from '../helpers/database.js';
import { databaseBehindRelay } from '../helpers/relay.js';
import { parseScrape, sampleValue } from '../helpers/metrics.js';
import { adminGateway, call } from '../events/admin.js';
import { pushEnv, until, webhookSecret } from '../events/fixtures.js';
import { insertEvent, insertRow, sharedDatabase } from '../stats/fixtures.js';

const NOW = new Date('2026-11-23T04:30:00Z');
const database = await sharedDatabase(t);

const deadOf = (samples: ReturnType<typeof parseScrape>, endpoint: 'exists' | 'deleted') =>
  sampleValue(samples, 'underwriting_event_deliveries_dead', { endpoint });

async function scrape(app: Awaited<ReturnType<typeof buildTestApp>>['app']) {
  const res = await app.inject({ method: 'GET', url: '/metrics' });
  t.equal(res.statusCode, 200);
  return { text: res.body, samples: parseScrape(res.body) };
}

t.test("the first scrape's database gauges agree with /v1/stats' now (none is a scrape late)", async (t) => {
  const { app } = await buildTestApp(t, { clock: () => NOW, database });
  const { db } = database;
  const waiting = await insertRow(db, { status: 'submitted', submittedAt: new Date(NOW.getTime() - 125_000) });
  await insertRow(db, { status: 'submitting', submittedAt: new Date(NOW.getTime() - 5_000) });
  await insertRow(db, { status: 'expired', submittedAt: new Date(NOW.getTime() - 7200_000) });
  await insertEvent(db, { requestId: waiting, createdAt: new Date(NOW.getTime() - 600_000), deliveries: [{ status: 'pending' }, { status: 'dead' }] });
  await insertEvent(db, { requestId: waiting, createdAt: new Date(NOW.getTime() - 60_000), deliveries: [{ status: 'pending' }, { status: 'delivered' }] });

  // The very first scrape of this instance: before the fix it printed the oldest delivery as 0.
  const { samples } = await scrape(app);
  const stats = (await app.inject({ url: '/v1/stats' })).json().now;
  t.same(stats.events, { pending: 2, dead: 1, oldestPendingAgeS: 600 });
  t.equal(sampleValue(samples, 'underwriting_pending_requests'), stats.pending);
  t.equal(sampleValue(samples, 'underwriting_request_oldest_pending_seconds'), stats.oldestPendingAgeS);
  t.equal(sampleValue(samples, 'underwriting_event_deliveries_pending'), stats.events.pending);
  t.equal(deadOf(samples, 'exists') + deadOf(samples, 'deleted'), stats.events.dead);
  t.equal(sampleValue(samples, 'underwriting_event_delivery_oldest_pending_seconds'), stats.events.oldestPendingAgeS);
  t.equal(sampleValue(samples, 'underwriting_event_url_deliveries', { url: 'https://hooks.example', status: 'pending' }), 2);
  t.equal(sampleValue(samples, 'underwriting_event_url_deliveries', { url: 'https://hooks.example', status: 'dead' }), 1);

  // The next scrape follows the database at once, not one scrape later.
  await sql`update event_deliveries set status = 'delivered' where status = 'pending'`.execute(db);
  const after = (await scrape(app)).samples;
  t.equal(sampleValue(after, 'underwriting_event_deliveries_pending'), 0);
  t.equal(sampleValue(after, 'underwriting_event_delivery_oldest_pending_seconds'), 0, 'no pending delivery: 0, in the same scrape');
  t.same(after.filter((s) => s.name === 'underwriting_event_url_deliveries' && s.labels.status === 'pending'), [], 'no per-URL pending series left over');
});

t.test('dead deliveries are counted apart by whether their endpoint exists: what deleting one wrote off is endpoint="deleted"', async (t) => {
  const fresh = await freshDatabase(t);
  const { app } = await adminGateway(t, fresh);
  const failing = (await call(app, 'POST', '/v1/endpoints', { url: 'http://127.0.0.1:9/failing' })).body;
  const backlog = (await call(app, 'POST', '/v1/endpoints', { url: 'http://127.0.0.1:9/backlog' })).body;
  // Paused, so that the worker writes and attempts nothing of its own: the backlog waits, as a paused endpoint's does.
  for (const { id } of [failing, backlog]) t.equal((await call(app, 'PATCH', `/v1/endpoints/${id}`, { status: 'paused' })).status, 200);
  const delivery = async (key: string, status: 'pending' | 'dead', lastError: string | null) => {
    const id = await insertEvent(fresh.db, { createdAt: NOW });
    await sql`insert into event_deliveries (event_id, customer_uuid, url_key, url, status, attempts, queued_at, next_attempt_at, last_error)
              values (${id}, 'c', ${key}, 'http://127.0.0.1:9/', ${status}, ${status === 'dead' ? 9 : 0}, ${NOW}, ${NOW}, ${lastError})`.execute(fresh.db);
  };
  await delivery(failing.id, 'dead', 'HTTP 503'); // died by failing for EVENT_RETRY_HORIZON_S
  await delivery(backlog.id, 'pending', null);
  await delivery(backlog.id, 'pending', null);
  const dead = async () => {
    const { samples } = await scrape(app);
    const stats = (await app.inject({ url: '/v1/stats' })).json().now;
    t.equal(deadOf(samples, 'exists') + deadOf(samples, 'deleted'), stats.events.dead, 'the two series add up to /v1/stats');
    return { exists: deadOf(samples, 'exists'), deleted: deadOf(samples, 'deleted') };
  };
  t.same(await dead(), { exists: 1, deleted: 0 }, 'the delivery that died by failing is what the alert counts');

  t.equal((await call(app, 'DELETE', `/v1/endpoints/${backlog.id}`)).status, 204);
  t.same(await dead(), { exists: 1, deleted: 2 }, 'the backlog ended dead (endpoint_deleted) by the delete is written off');

  // Deleting the failing endpoint writes off what died before: no redelivery can reach it any more.
  t.equal((await call(app, 'DELETE', `/v1/endpoints/${failing.id}`)).status, 204);
  t.same(await dead(), { exists: 0, deleted: 3 });
});

t.test('cluster-wide gauges say so in their HELP (aggregate with max)', async (t) => {
  const { app } = await buildTestApp(t, { clock: () => NOW, database });
  const { text } = await scrape(app);
  for (const name of [
    'underwriting_pending_requests',
    'underwriting_request_oldest_pending_seconds',
    'underwriting_event_deliveries_pending',
    'underwriting_event_deliveries_dead',
    'underwriting_event_delivery_oldest_pending_seconds',
    'underwriting_event_url_deliveries',
    'underwriting_provider_circuit_open',
    'underwriting_provider_hold_seconds',
    'underwriting_provider_calls_in_flight',
  ]) {
    t.match(text, new RegExp(`^# HELP ${name} .*aggregate with max\\(\\), never sum\\(\\)$`, 'm'), name);
  }
});

t.test(`per-URL series are bounded: ${MAX_URL_SERIES} URLs, the rest summed as "other"`, async (t) => {
  const { app } = await buildTestApp(t, { clock: () => NOW, database });
  const id = await insertEvent(database.db, { createdAt: NOW });
  for (let n = 0; n < MAX_URL_SERIES + 5; n++) {
    await sql`insert into event_deliveries (event_id, customer_uuid, url_key, url, status, queued_at, next_attempt_at)
              values (${id}, 'c', ${`k-${n}`}, ${`https://r${String(n).padStart(2, '0')}.example/`}, 'dead', ${NOW}, ${NOW})`.execute(database.db);
  }
  const series = (await scrape(app)).samples.filter((s) => s.name === 'underwriting_event_url_deliveries');
  t.equal(series.length, MAX_URL_SERIES + 1);
  t.equal(sampleValue(series, 'underwriting_event_url_deliveries', { url: 'other', status: 'dead' }), 5);
  t.equal(series.reduce((n, s) => n + s.value, 0), MAX_URL_SERIES + 5, 'every delivery counted once');
});

t.test("a receiver URL's userinfo, path and query never reach a label: its origin only", async (t) => {
  const url = 'http://hookuser:hookpass-9a8b7c@127.0.0.1:9/hooks/pathsecret-3d4c?token=querysecret-5e6f&v=2';
  const { app } = await buildTestApp(t, { clock: () => NOW, database, env: pushEnv([url], webhookSecret()) });
  await app.ready();
  // An event after the URL's starting position: pending for it, written or not yet.
  await insertEvent(database.db, { requestId: await insertRow(database.db, { status: 'completed', submittedAt: NOW }), createdAt: NOW });
  const { text, samples } = await until(async () => {
    const s = await scrape(app);
    return s.samples.some((x) => x.name === 'underwriting_event_url_deliveries') ? s : undefined;
  });
  t.ok(sampleValue(samples, 'underwriting_event_url_deliveries', { url: 'http://127.0.0.1:9', status: 'pending' }) >= 1);
  for (const secret of ['hookuser', 'hookpass-9a8b7c', 'pathsecret-3d4c', 'querysecret-5e6f']) t.notOk(text.includes(secret), `no ${secret} in the scrape`);
});

t.test("a duration histogram's last bucket reaches the longest its default configuration allows (histogram_quantile reads no further)", async (t) => {
  const defaults = loadConfig({});
  const { app } = await buildTestApp(t, { clock: () => NOW, database });
  const { text } = await scrape(app);
  const lastBucket = (name: string) => Math.max(...[...text.matchAll(new RegExp(`^${name}_bucket\\{le="([\\d.]+)"\\}`, 'gm'))].map((m) => Number(m[1])));
  // A receiver down for a day is retried until EVENT_RETRY_HORIZON_S: its deliveries' lag was read as 1 h.
  t.ok(lastBucket('underwriting_event_delivery_lag_seconds') >= defaults.eventRetryHorizonS, 'delivery lag: EVENT_RETRY_HORIZON_S');
  t.ok(lastBucket('underwriting_callback_turnaround_seconds') >= defaults.callbackTimeoutS, 'turnaround: CALLBACK_TIMEOUT_S');
});

t.test("prom-client's default gauges named like counters are not exported; the database readiness gauge is", async (t) => {
  const { app } = await buildTestApp(t, { database });
  const { text, samples } = await scrape(app);
  t.notMatch(text, /nodejs_active_(handles|requests|resources)_total/);
  t.match(text, /^nodejs_active_handles\{type="/m, 'the by-type gauges stay');
  t.equal(sampleValue(samples, 'underwriting_database_ready'), 1);
  t.equal(sampleValue(samples, 'underwriting_callback_timeout_seconds'), 3600);
});

if (SERVER_URL) {
  t.test('the database readiness gauge is 0 while the database is unreachable, 1 once it is back, and the scrape still answers', async (t) => {
    const { database: behind, relay } = await databaseBehindRelay(t);
    const { app } = await buildTestApp(t, { database: behind });
    t.equal(sampleValue((await scrape(app)).samples, 'underwriting_database_ready'), 1);
    relay.cut();
    t.equal(sampleValue((await scrape(app)).samples, 'underwriting_database_ready'), 0, 'cut: 0');
    relay.restore();
    await until(async () => (sampleValue((await scrape(app)).samples, 'underwriting_database_ready') === 1 ? true : undefined), 10_000);
    t.pass('back: 1');
  });

  t.test('the pool gauges: connections in use and idle, and queries waiting for one', async (t) => {
    const { app } = await buildTestApp(t, { database });
    // Hold every connection of the pool, and one more query waiting behind them.
    const pool = database.poolStats()!;
    t.ok(pool.max >= 1);
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const holders = Array.from({ length: pool.max + 1 }, () =>
      database.db.connection().execute(async (c) => {
        await sql`select 1`.execute(c);
        await held;
      }),
    );
    const { samples } = await until(async () => {
      const s = await scrape(app);
      return sampleValue(s.samples, 'underwriting_db_pool_waiting', { pool: 'routes' }) >= 1 ? s : undefined;
    });
    t.equal(sampleValue(samples, 'underwriting_db_pool_connections', { pool: 'routes', state: 'in_use' }), pool.max);
    t.equal(sampleValue(samples, 'underwriting_db_pool_max', { pool: 'routes' }), pool.max);
    // The pacing pool is its own, with its own series: nothing of it waits for the routes' pool.
    t.equal(sampleValue(samples, 'underwriting_db_pool_max', { pool: 'pacing' }), PACING_POOL_SIZE);
    t.equal(sampleValue(samples, 'underwriting_db_pool_waiting', { pool: 'pacing' }), 0);
    release();
    await Promise.all(holders);
    // The scrapes that waited meanwhile drain too: poll until nothing waits.
    await until(async () => (sampleValue((await scrape(app)).samples, 'underwriting_db_pool_waiting', { pool: 'routes' }) === 0 ? true : undefined), 5000);
    t.pass('nothing waits once the connections are given back');
  });
}
