import { sql } from 'kysely';
import t from 'tap';
import { purgePass } from '../../src/retention/sweep.js';
import { binMs } from '../../src/aggregates/turnaround.js';
import { buildTestApp } from '../helpers/app.js';
import { parseScrape, sampleValue } from '../helpers/metrics.js';
import { daysAgo, insertEvent, insertRow, insertStray, sharedDatabase } from './fixtures.js';

const NOW = new Date('2026-11-23T04:30:00Z');
const KEY = 'stats-key-0123456789abcdef';
const database = await sharedDatabase(t);

interface Bucket {
  start: string;
  submitted: number;
  completed: number;
  expired: number;
  submit_failed: number;
  pending: number;
  decisions: Record<string, number>;
  turnaroundMs: { p50: number | null; p95: number | null };
  unmatched: number;
  invalid: number;
}

async function stats(app: Awaited<ReturnType<typeof buildTestApp>>['app'], query: string) {
  const res = await app.inject({ url: `/v1/stats?${query}` });
  if (res.statusCode !== 200) throw new Error(`${res.statusCode} ${res.body}`);
  return res.json() as { bucket: string; since: string; until: string; buckets: Bucket[]; now: Record<string, unknown> };
}

t.test('counts per hour bucket, empty buckets included, of the requests submitted in each', async (t) => {
  const { app } = await buildTestApp(t, { clock: () => NOW, database });
  const { db } = database;
  // 01:00-02:00: two approved, one declined, one filtered, one expired, one failed, one waiting.
  await insertRow(db, { status: 'completed', submittedAt: '2026-11-23T01:05:00Z', decision: 'approved' });
  await insertRow(db, { status: 'completed', submittedAt: '2026-11-23T01:10:00Z', decision: 'approved' });
  await insertRow(db, { status: 'completed', submittedAt: '2026-11-23T01:20:00Z', decision: 'declined' });
  await insertRow(db, { status: 'completed', submittedAt: '2026-11-23T01:59:59.999Z', decision: 'filtered' });
  await insertRow(db, { status: 'expired', submittedAt: '2026-11-23T01:30:00Z' });
  await insertRow(db, { status: 'submit_failed', submittedAt: '2026-11-23T01:40:00Z' });
  await insertRow(db, { status: 'submitted', submittedAt: '2026-11-23T01:50:00Z' });
  // 03:00-04:00: one no_score; and stray callbacks that arrived at 02:xx.
  await insertRow(db, { status: 'completed', submittedAt: '2026-11-23T03:00:00Z', decision: 'no_score' });
  await insertStray(db, 'unmatched', '2026-11-23T02:10:00Z');
  await insertStray(db, 'unmatched', '2026-11-23T02:20:00Z');
  await insertStray(db, 'invalid', '2026-11-23T02:30:00Z');
  // Outside the range.
  await insertRow(db, { status: 'completed', submittedAt: '2026-11-23T00:59:59Z' });
  await insertRow(db, { status: 'completed', submittedAt: '2026-11-23T04:00:00Z' });

  const body = await stats(app, 'since=2026-11-23T01:00:00Z&until=2026-11-23T04:00:00Z&bucket=hour');
  t.equal(body.bucket, 'hour');
  t.equal(body.since, '2026-11-23T01:00:00.000Z');
  t.equal(body.until, '2026-11-23T04:00:00.000Z');
  t.same(
    body.buckets.map((b) => b.start),
    ['2026-11-23T01:00:00.000Z', '2026-11-23T02:00:00.000Z', '2026-11-23T03:00:00.000Z'],
  );
  const [one, two, three] = body.buckets;
  t.match(one, {
    submitted: 7, completed: 4, expired: 1, submit_failed: 1, pending: 1,
    decisions: { approved: 2, declined: 1, no_score: 0, filtered: 1 }, unmatched: 0, invalid: 0,
  });
  t.match(two, {
    submitted: 0, completed: 0, expired: 0, submit_failed: 0, pending: 0,
    decisions: { approved: 0, declined: 0, no_score: 0, filtered: 0 },
    turnaroundMs: { p50: null, p95: null }, unmatched: 2, invalid: 1,
  });
  t.match(three, { submitted: 1, completed: 1, decisions: { no_score: 1 } });
});

t.test('day buckets are UTC days; since rounds down and until up to whole buckets', async (t) => {
  const { app } = await buildTestApp(t, { clock: () => NOW, database });
  await insertRow(database.db, { status: 'completed', submittedAt: '2026-11-20T23:59:59Z' });
  await insertRow(database.db, { status: 'completed', submittedAt: '2026-11-21T00:00:00Z' });
  await insertRow(database.db, { status: 'expired', submittedAt: '2026-11-22T12:00:00Z' });
  const body = await stats(app, 'since=2026-11-20T10:00:00-03:00&until=2026-11-22T00:00:01Z&bucket=day');
  t.equal(body.since, '2026-11-20T00:00:00.000Z', 'since, 13:00 UTC, rounds down to its day');
  t.equal(body.until, '2026-11-23T00:00:00.000Z', 'until rounds up');
  t.same(body.buckets.map((b) => [b.start.slice(0, 10), b.submitted, b.completed, b.expired]), [
    ['2026-11-20', 1, 1, 0],
    ['2026-11-21', 1, 1, 0],
    ['2026-11-22', 1, 0, 1],
  ]);
  const defaults = await stats(app, 'bucket=day');
  t.equal(defaults.buckets.length, 30, 'by default the last 30 days');
  t.equal(defaults.until, '2026-11-24T00:00:00.000Z', 'up to the end of today');
  t.equal((await stats(app, '')).buckets.length, 24, 'and the last 24 hours by hour');
});

t.test('an until microseconds past a bucket start rounds up to that bucket\'s end, though Date drops microseconds', async (t) => {
  const { app } = await buildTestApp(t, { clock: () => NOW, database });
  const body = await stats(app, 'since=2026-11-22T10:00:00Z&until=2026-11-22T10:00:00.000001Z');
  t.equal(body.until, '2026-11-22T11:00:00.000Z');
  t.same(body.buckets.map((b) => b.start), ['2026-11-22T10:00:00.000Z']);
  t.equal((await stats(app, 'since=2026-11-22T10:00:00Z&until=2026-11-22T10:00:00.000100Z&bucket=day')).until, '2026-11-23T00:00:00.000Z');
  const onTheHour = await app.inject({ url: '/v1/stats?since=2026-11-22T09:00:00Z&until=2026-11-22T10:00:00.000000Z' });
  t.equal(onTheHour.json().until, '2026-11-22T10:00:00.000Z', 'zeros past the millisecond stay on the hour');
});

t.test('turnaround p50 and p95 of a bucket, within a histogram bin of the exact values', async (t) => {
  const { app } = await buildTestApp(t, { clock: () => NOW, database });
  // 100 completed requests with turnarounds of 1..100 s: nearest-rank p50 = 50 s, p95 = 95 s.
  for (let i = 1; i <= 100; i++) {
    await insertRow(database.db, { status: 'completed', submittedAt: new Date(Date.UTC(2026, 10, 22, 10, 0, i)), turnaroundMs: i * 1000 });
  }
  // Failed and expired requests have no turnaround.
  await insertRow(database.db, { status: 'expired', submittedAt: '2026-11-22T10:30:00Z' });
  const body = await stats(app, 'since=2026-11-22T10:00:00Z&until=2026-11-22T11:00:00Z');
  const { p50, p95 } = body.buckets[0]!.turnaroundMs;
  t.ok(p50 !== null && Math.abs(p50 - 50_000) / 50_000 < 0.045, `p50 ${p50} within 4.5% of 50 s`);
  t.ok(p95 !== null && Math.abs(p95 - 95_000) / 95_000 < 0.045, `p95 ${p95} within 4.5% of 95 s`);
  t.not(p50, p95);
  // Where values are far apart, each percentile lands in its own value's bin.
  for (let i = 0; i < 19; i++) await insertRow(database.db, { status: 'completed', submittedAt: `2026-11-22T12:00:${String(i).padStart(2, '0')}Z`, turnaroundMs: 2000 });
  await insertRow(database.db, { status: 'completed', submittedAt: '2026-11-22T12:00:30Z', turnaroundMs: 3_600_000 });
  const skewed = (await stats(app, 'since=2026-11-22T12:00:00Z&until=2026-11-22T13:00:00Z')).buckets[0]!;
  t.equal(skewed.turnaroundMs.p50, binMs(Math.floor(8 * Math.log2(2000))), 'p50: 2 s');
  t.equal(skewed.turnaroundMs.p95, binMs(Math.floor(8 * Math.log2(2000))), 'p95: still 2 s (19 of 20)');
  await insertRow(database.db, { status: 'completed', submittedAt: '2026-11-22T12:00:31Z', turnaroundMs: 3_600_000 });
  const tail = (await stats(app, 'since=2026-11-22T12:00:00Z&until=2026-11-22T13:00:00Z')).buckets[0]!;
  t.ok(Math.abs(tail.turnaroundMs.p95! - 3_600_000) / 3_600_000 < 0.045, `p95 ${tail.turnaroundMs.p95}: 1 h once 2 of 21 are`);
});

t.test('purged days read from the aggregates: the same figures before and after, nothing counted twice', async (t) => {
  const { app } = await buildTestApp(t, { clock: () => NOW, database });
  const { db } = database;
  // Three days 40-38 days ago, with every status, decisions and spread turnarounds.
  const statuses = ['completed', 'completed', 'completed', 'expired', 'submit_failed'] as const;
  const decisions = ['approved', 'declined', 'no_score', 'filtered'] as const;
  for (let i = 0; i < 60; i++) {
    await insertRow(db, {
      status: statuses[i % 5]!,
      decision: decisions[i % 4]!,
      submittedAt: new Date(daysAgo(NOW, 40).getTime() + i * 67 * 60_000),
      turnaroundMs: 500 * (i + 1) ** 2,
    });
  }
  // A request of the same days changed recently stays live, beside its purged neighbours.
  await insertRow(db, { status: 'completed', submittedAt: daysAgo(NOW, 39), updatedAt: daysAgo(NOW, 1), turnaroundMs: 38 * 86_400_000 });
  for (let i = 0; i < 9; i++) await insertStray(db, i % 3 ? 'unmatched' : 'invalid', new Date(daysAgo(NOW, 39).getTime() + i * 3600_000));
  const query = `since=${daysAgo(NOW, 41).toISOString()}&until=${daysAgo(NOW, 36).toISOString()}`;
  const beforeDays = await stats(app, `${query}&bucket=day`);
  const beforeHours = await stats(app, `${query}&bucket=hour`);

  const purged = await purgePass(db, NOW, 30);
  t.equal(purged.underwriting_requests, 60, 'the 60 old requests are purged; the recently changed one stays');
  const afterDays = await stats(app, `${query}&bucket=day`);
  const afterHours = await stats(app, `${query}&bucket=hour`);
  t.same(afterDays.buckets, beforeDays.buckets, 'day buckets unchanged by the purge');
  t.same(afterHours.buckets, beforeHours.buckets, 'hour buckets unchanged by the purge');
  const total = (b: { buckets: Bucket[] }, f: (x: Bucket) => number) => b.buckets.reduce((n, x) => n + f(x), 0);
  t.equal(total(afterDays, (b) => b.submitted), 61);
  t.equal(total(afterDays, (b) => b.completed), 37);
  t.equal(total(afterDays, (b) => b.unmatched + b.invalid), 9);
  t.ok(afterDays.buckets.some((b) => b.turnaroundMs.p95 !== null && b.turnaroundMs.p95 > 86_400_000), 'the live late one merges into its purged day');
});

t.test('now: pending and the oldest one, stray callbacks in the last 24 h, event deliveries pending and dead', async (t) => {
  const { app } = await buildTestApp(t, { clock: () => NOW, database });
  const { db } = database;
  const waiting = await insertRow(db, { status: 'submitted', submittedAt: new Date(NOW.getTime() - 125_000) });
  await insertRow(db, { status: 'submitting', submittedAt: new Date(NOW.getTime() - 5_000) });
  await insertRow(db, { status: 'expired', submittedAt: daysAgo(NOW, 3) });
  await insertStray(db, 'unmatched', new Date(NOW.getTime() - 3600_000));
  await insertStray(db, 'unmatched', new Date(NOW.getTime() - 25 * 3600_000));
  await insertStray(db, 'invalid', new Date(NOW.getTime() - 60_000));
  // Two pending deliveries (the oldest queued 10 min ago), one dead, one delivered.
  await insertEvent(db, { requestId: waiting, createdAt: new Date(NOW.getTime() - 600_000), deliveries: [{ status: 'pending' }, { status: 'dead' }] });
  await insertEvent(db, { requestId: waiting, createdAt: new Date(NOW.getTime() - 60_000), deliveries: [{ status: 'pending' }, { status: 'delivered' }] });
  const { now } = await stats(app, '');
  t.same(now, {
    at: NOW.toISOString(),
    pending: 2,
    oldestPendingAgeS: 125,
    unmatched24h: 1,
    invalid24h: 1,
    events: { pending: 2, dead: 1, oldestPendingAgeS: 600 },
    token: { configured: false, expiresAt: null, renewAt: null },
  });

  await sql`truncate underwriting_requests, callbacks cascade`.execute(db);
  await sql`truncate events cascade`.execute(db);
  t.match((await stats(app, '')).now, { pending: 0, oldestPendingAgeS: null, events: { pending: 0, dead: 0, oldestPendingAgeS: null } });
});

t.test('queued requests (Prefer: respond-async, campaigns) await the provider too: pending in now and in their bucket; cancelled ones not', async (t) => {
  const { app } = await buildTestApp(t, { clock: () => NOW, database });
  const { db } = database;
  await insertRow(db, { status: 'submitted', submittedAt: new Date(NOW.getTime() - 125_000) });
  // A queued request's submitted_at is when it was queued (the forwarder sets it again when it sends it).
  await insertRow(db, { status: 'queued', submittedAt: new Date(NOW.getTime() - 300_000) });
  await insertRow(db, { status: 'queued', submittedAt: new Date(NOW.getTime() - 10_000) });
  await insertRow(db, { status: 'cancelled', submittedAt: new Date(NOW.getTime() - 900_000) });
  const body = await stats(app, `since=${new Date(NOW.getTime() - 3600_000).toISOString()}&until=${NOW.toISOString()}&bucket=hour`);
  t.match(body.now, { pending: 3, oldestPendingAgeS: 300 });
  const total = (f: (x: Bucket) => number) => body.buckets.reduce((n: number, x: Bucket) => n + f(x), 0);
  t.equal(total((b) => b.pending), 3, 'the buckets count them pending too');
  t.equal(total((b) => b.submitted), 4);
  const scrape = parseScrape((await app.inject({ url: '/metrics' })).body);
  t.equal(sampleValue(scrape, 'underwriting_pending_requests'), 3, 'the gauge reads the same statement');
  t.equal(sampleValue(scrape, 'underwriting_request_oldest_pending_seconds'), 300);
  // The overdue alert's figure: what the expiry sweep ends (a queued request never expires).
  t.equal(sampleValue(scrape, 'underwriting_request_oldest_submitted_seconds'), 125, 'queued requests are not awaiting a callback');
  await sql`truncate underwriting_requests, callbacks, events cascade`.execute(db);
});

t.test("the token client's timing, never the token", async (t) => {
  const expiresAt = new Date('2026-11-23T05:30:00Z');
  const renewAt = new Date('2026-11-23T05:25:00Z');
  const token = 'eyJhbGciOiJSUzI1NiJ9.secret-token-value.signature';
  let held = false;
  const tokenSource = { getToken: async () => token, status: () => (held ? { expiresAt, renewAt } : undefined) };
  const { app } = await buildTestApp(t, { clock: () => NOW, tokenSource, database });
  t.same((await stats(app, '')).now.token, { configured: true, expiresAt: null, renewAt: null }, 'configured, no token yet');
  held = true;
  const res = await app.inject({ url: '/v1/stats' });
  t.same(res.json().now.token, { configured: true, expiresAt: expiresAt.toISOString(), renewAt: renewAt.toISOString() });
  t.notMatch(res.body, /secret-token-value/);
});

t.test('a range that is empty, reversed or too long is a 400', async (t) => {
  const { app } = await buildTestApp(t, { clock: () => NOW, database });
  for (const query of [
    'since=2026-11-23T02:00:00Z&until=2026-11-23T01:00:00Z',
    'since=2026-01-01&until=2026-11-01&bucket=hour',
    'bucket=week',
    'since=yesterday',
  ]) {
    const res = await app.inject({ url: `/v1/stats?${query}` });
    t.equal(res.statusCode, 400, query);
    t.equal(res.json().error, 'validation_failed');
  }
  t.equal((await app.inject({ url: '/v1/stats?since=2026-01-01&until=2026-11-01&bucket=day' })).statusCode, 200, 'the same range by day');
});

t.test('the query allowlist and keys guard /v1/stats', async (t) => {
  const { app } = await buildTestApp(t, { env: { QUERY_API_KEYS: KEY }, database });
  t.equal((await app.inject({ url: '/v1/stats' })).statusCode, 401);
  t.equal((await app.inject({ url: '/v1/stats', headers: { authorization: 'Bearer wrong-key-0123456789' } })).statusCode, 401);
  t.equal((await app.inject({ url: '/v1/stats', headers: { authorization: `Bearer ${KEY}` } })).statusCode, 200);
  const outside = await app.inject({ url: '/v1/stats', remoteAddress: '203.0.113.9', headers: { authorization: `Bearer ${KEY}` } });
  t.equal(outside.statusCode, 403);
  t.equal(outside.json().error, 'forbidden');
});

t.test('the OpenAPI document describes /v1/stats and /v1/callbacks', async (t) => {
  const { app } = await buildTestApp(t, { database });
  const doc = (await app.inject({ url: '/docs/json' })).json();
  // A named schema is a $ref into components.schemas.
  const resolve = (schema: { $ref?: string; properties?: Record<string, unknown> }) =>
    schema.$ref ? doc.components.schemas[schema.$ref.split('/').pop()!] : schema;
  const stats = doc.paths['/v1/stats'].get;
  t.ok(stats.parameters.some((p: { name: string }) => p.name === 'bucket'));
  t.ok(resolve(stats.responses['200'].content['application/json'].schema).properties.now);
  const callbacks = doc.paths['/v1/callbacks'].get;
  t.ok(callbacks.parameters.some((p: { name: string }) => p.name === 'kind'));
  t.ok(resolve(callbacks.responses['200'].content['application/json'].schema).properties.items);
});
