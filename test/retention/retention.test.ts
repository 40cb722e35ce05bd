import { sql } from 'kysely';
import t, { type Test } from 'tap';
import { openDatabase } from '../../src/db/database.js';
import type { DatabaseHandle } from '../../src/db/handle.js';
import { migrateToLatest } from '../../src/db/migrator.js';
import { purgePass, purgeRequestBatch, retentionCutoff } from '../../src/retention/sweep.js';
import { loadConfig } from '../../src/config/config.js';
import { buildTestApp } from '../helpers/app.js';
import { configProblems } from '../helpers/config.js';
import { anotherConnection, ENGINE } from '../helpers/database.js';
import { countRows, daysAgo, hoursAgo, insertEvent, insertRow, insertStray, sharedDatabase } from '../stats/fixtures.js';

const NOW = new Date('2026-11-23T04:00:00Z');
const shared = await sharedDatabase(t);

/** PGlite in memory, migrated: the retention storage also runs on the embedded engine. */
async function pgliteDatabase(t: Test): Promise<DatabaseHandle> {
  const database = await openDatabase({ databaseUrl: undefined, dataDir: 'memory://' });
  t.teardown(() => database.close());
  await migrateToLatest(database);
  return database;
}

async function aggregates(database: DatabaseHandle) {
  const { rows } = await sql<Record<string, number>>`
    select coalesce(sum(submitted), 0)::int as submitted, coalesce(sum(completed), 0)::int as completed,
           coalesce(sum(expired), 0)::int as expired, coalesce(sum(submit_failed), 0)::int as submit_failed,
           coalesce(sum(approved), 0)::int as approved, coalesce(sum(declined), 0)::int as declined,
           coalesce(sum(unmatched), 0)::int as unmatched, coalesce(sum(invalid), 0)::int as invalid,
           (select coalesce(sum(requests), 0)::int from turnaround_hourly) as turnarounds
      from statistics_hourly`.execute(database.db);
  return rows[0]!;
}

const engines: Array<[string, (t: Test) => Promise<DatabaseHandle>]> = [[ENGINE, async () => shared]];
if (ENGINE === 'postgres') engines.push(['pglite', pgliteDatabase]);

for (const [engine, open] of engines) {
  t.test(`a pass deletes what last changed before RETENTION_DAYS, folds it into the aggregates, and keeps the rest (${engine})`, async (t) => {
    const database = await open(t);
    const { db } = database;
    // Past retention (30 days): a completed request with its callback, idempotency key and event
    // (two deliveries), an expired one with its event, a failed one, an unmatched callback with its
    // event, an invalid callback.
    const old = await insertRow(db, { status: 'completed', submittedAt: daysAgo(NOW, 40), turnaroundMs: 2000, decision: 'declined', idempotencyKey: 'key-old' });
    await insertEvent(db, { requestId: old, createdAt: daysAgo(NOW, 40), deliveries: [{ status: 'delivered' }, { status: 'dead' }] });
    const expired = await insertRow(db, { status: 'expired', submittedAt: daysAgo(NOW, 35) });
    await insertEvent(db, { requestId: expired, createdAt: daysAgo(NOW, 35), deliveries: [{ status: 'delivered' }] });
    await insertRow(db, { status: 'submit_failed', submittedAt: daysAgo(NOW, 31) });
    const stray = await insertStray(db, 'unmatched', daysAgo(NOW, 33));
    await insertEvent(db, { callbackId: stray, createdAt: daysAgo(NOW, 33), deliveries: [{ status: 'delivered' }] });
    await insertStray(db, 'invalid', daysAgo(NOW, 32));
    // Kept: recent rows and their events; an old request changed recently (a late callback) with
    // its old event; an old request still awaiting the provider; recent stray callbacks.
    const recent = await insertRow(db, { status: 'completed', submittedAt: daysAgo(NOW, 2), idempotencyKey: 'key-new' });
    await insertEvent(db, { requestId: recent, createdAt: daysAgo(NOW, 2), deliveries: [{ status: 'pending' }] });
    const late = await insertRow(db, { status: 'completed', submittedAt: daysAgo(NOW, 45), updatedAt: daysAgo(NOW, 3), turnaroundMs: 42 * 24 * 3600_000 });
    await insertEvent(db, { requestId: late, createdAt: daysAgo(NOW, 44), deliveries: [{ status: 'delivered' }] });
    await insertRow(db, { status: 'submitted', submittedAt: daysAgo(NOW, 50) });
    await insertStray(db, 'unmatched', daysAgo(NOW, 29));
    await insertStray(db, 'invalid', hoursAgo(NOW, 1));
    t.same(await countRows(db), { requests: 6, callbacks: 7, keys: 2, events: 5, deliveries: 6 });

    const purged = await purgePass(db, NOW, 30);
    t.same(
      purged,
      { underwriting_requests: 3, callbacks: 3, idempotency_keys: 1, events: 3, event_deliveries: 4, campaigns: 0 },
      'three requests, their one callback, key and two events, two stray callbacks and one event, and their deliveries',
    );
    t.same(await countRows(db), { requests: 3, callbacks: 4, keys: 1, events: 2, deliveries: 2 });
    const { rows: left } = await sql<{ status: string }>`select status from underwriting_requests order by submitted_at`.execute(db);
    t.same(left.map((r) => r.status), ['submitted', 'completed', 'completed']);
    t.same(await aggregates(database), {
      submitted: 3, completed: 1, expired: 1, submit_failed: 1, approved: 0, declined: 1, unmatched: 1, invalid: 1, turnarounds: 1,
    });
    const { rows: hours } = await sql<{ hour: Date }>`select hour from statistics_hourly order by hour`.execute(db);
    t.ok(hours.every((h) => h.hour.getTime() % 3600_000 === 0), 'aggregates are keyed by whole UTC hours');

    t.same(await purgePass(db, NOW, 30), { underwriting_requests: 0, callbacks: 0, idempotency_keys: 0, events: 0, event_deliveries: 0, campaigns: 0 }, 'a second pass finds nothing');
    t.same((await aggregates(database)).submitted, 3, 'and counts nothing twice');
  });
}

t.test('a pass does bounded work: at most maxBatches of batch rows of each kind', async (t) => {
  const { db } = shared;
  await sql`
    insert into underwriting_requests (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, status, submitted_at, updated_at)
    select 'c-' || g, 'h', 'm', false, 'expired', ${daysAgo(NOW, 60)}::timestamptz + g * interval '1 second',
           ${daysAgo(NOW, 60)}::timestamptz + g * interval '1 second'
      from generate_series(1, 250) g`.execute(db);
  const first = await purgePass(db, NOW, 30, { batch: 40, maxBatches: 3 });
  t.equal(first.underwriting_requests, 120, 'three batches of 40');
  const { rows } = await sql<{ first: Date }>`select min(submitted_at) as first from underwriting_requests`.execute(db);
  t.equal(rows[0]!.first.getTime(), daysAgo(NOW, 60).getTime() + 121_000, 'the oldest go first');
  t.equal((await purgePass(db, NOW, 30, { batch: 40, maxBatches: 10 })).underwriting_requests, 130);
});

t.test('two instances sweeping at once purge every row once and count each once', async (t) => {
  const database = shared;
  const other = await anotherConnection(t, database);
  await sql`
    insert into underwriting_requests
      (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, status, decision, submitted_at, updated_at, completed_at)
    select 'c-' || g, 'h', 'm', false,
           case when g % 5 = 0 then 'expired' else 'completed' end,
           case when g % 5 = 0 then null when g % 2 = 0 then 'approved' else 'declined' end,
           ${daysAgo(NOW, 40)}::timestamptz + g * interval '37 seconds',
           ${daysAgo(NOW, 40)}::timestamptz + g * interval '37 seconds' + interval '5 seconds',
           case when g % 5 = 0 then null else ${daysAgo(NOW, 40)}::timestamptz + g * interval '37 seconds' + interval '5 seconds' end
      from generate_series(1, 2000) g`.execute(database.db);
  await sql`
    insert into callbacks (received_at, raw_body, outcome, customer_uuid, request_id)
    select completed_at, '\\x7b7d'::bytea, 'matched', customer_uuid, id from underwriting_requests where completed_at is not null`.execute(database.db);
  await sql`update underwriting_requests r set result_callback_id = c.id from callbacks c where c.request_id = r.id`.execute(database.db);
  await sql`
    insert into callbacks (received_at, raw_body, outcome, error)
    select ${daysAgo(NOW, 40)}::timestamptz + g * interval '1 minute', '\\x7b'::bytea,
           case when g % 3 = 0 then 'invalid' else 'unmatched' end, 'bad'
      from generate_series(1, 600) g`.execute(database.db);
  // An event per request, each with a delivery.
  await sql`
    insert into events (public_id, type, customer_uuid, created_at, request_id, data)
    select 'evt_' || lpad(id::text, 32, '0'), 'underwriting.completed', customer_uuid, updated_at, id, '{}'::jsonb
      from underwriting_requests`.execute(database.db);
  await sql`
    insert into event_deliveries (event_id, customer_uuid, url_key, url, status, queued_at, next_attempt_at)
    select id, customer_uuid, 'k', 'https://hooks.example/', 'delivered', created_at, created_at from events`.execute(database.db);

  const limits = { batch: 25, maxBatches: 1000 };
  const [a, b] = await Promise.all([purgePass(database.db, NOW, 30, limits), purgePass(other.db, NOW, 30, limits)]);
  t.equal(a.underwriting_requests + b.underwriting_requests, 2000, 'every request purged once');
  t.equal(a.callbacks + b.callbacks, 1600 + 600, 'every callback purged once');
  t.equal(a.events + b.events, 2000, 'every event purged once');
  t.equal(a.event_deliveries + b.event_deliveries, 2000, 'every delivery purged once');
  if (ENGINE === 'postgres') t.ok(a.underwriting_requests > 0 && b.underwriting_requests > 0, 'both instances did part of the work');
  t.same(await countRows(database.db), { requests: 0, callbacks: 0, keys: 0, events: 0, deliveries: 0 });
  t.same(await aggregates(database), {
    submitted: 2000, completed: 1600, expired: 400, submit_failed: 0, approved: 800, declined: 800, unmatched: 400, invalid: 200, turnarounds: 1600,
  });
});

t.test('a request a sweep holds is skipped by the other, not waited for', async (t) => {
  const database = shared;
  const other = await anotherConnection(t, database);
  if (ENGINE !== 'postgres') return t.pass('PGlite is one connection: nothing to skip');
  await insertRow(database.db, { status: 'expired', submittedAt: daysAgo(NOW, 40) });
  await insertRow(database.db, { status: 'expired', submittedAt: daysAgo(NOW, 39) });
  const cutoff = retentionCutoff(NOW, 30);
  await database.db.transaction().execute(async (trx) => {
    await sql`select id from underwriting_requests order by submitted_at limit 1 for update`.execute(trx);
    const purged = await purgeRequestBatch(other.db, cutoff, 10);
    t.equal(purged.underwriting_requests, 1, 'only the request nobody holds');
  });
  t.equal((await countRows(database.db)).requests, 1);
});

t.test('the sweep runs in the app: purged rows by table in /metrics', async (t) => {
  const { app, database } = await buildTestApp(t, { env: { RETENTION_DAYS: '30' }, clock: () => NOW, database: shared });
  const request = await insertRow(database.db, { status: 'completed', submittedAt: daysAgo(NOW, 40), idempotencyKey: 'k-1' });
  await insertEvent(database.db, { requestId: request, createdAt: daysAgo(NOW, 40), deliveries: [{ status: 'delivered' }] });
  await insertStray(database.db, 'invalid', daysAgo(NOW, 40));
  await app.ready();
  await app.retentionSweep.run();
  t.same(await countRows(database.db), { requests: 0, callbacks: 0, keys: 0, events: 0, deliveries: 0 });
  const metrics = (await app.inject({ url: '/metrics' })).body;
  t.match(metrics, /underwriting_retention_purged_rows_total\{table="underwriting_requests"\} 1\n/);
  t.match(metrics, /underwriting_retention_purged_rows_total\{table="callbacks"\} 2\n/);
  t.match(metrics, /underwriting_retention_purged_rows_total\{table="idempotency_keys"\} 1\n/);
  t.match(metrics, /underwriting_retention_purged_rows_total\{table="events"\} 1\n/);
  t.match(metrics, /underwriting_retention_purged_rows_total\{table="event_deliveries"\} 1\n/);
});

t.test('without RETENTION_DAYS nothing is purged, and production warns at start', async (t) => {
  const production = {
    NODE_ENV: 'production',
    DATABASE_URL: 'postgres://unused@127.0.0.1:9/none',
    CALLBACK_ALLOWED_IPS: '127.0.0.1/32',
  };
  const kept = await buildTestApp(t, { env: production, clock: () => NOW, database: shared });
  await insertRow(kept.database.db, { status: 'completed', submittedAt: daysAgo(NOW, 4000) });
  await kept.app.ready();
  await kept.app.retentionSweep.run();
  t.equal((await countRows(kept.database.db)).requests, 1, 'kept forever');
  t.match(kept.logs.text(), /RETENTION_DAYS is not set/);

  const development = await buildTestApp(t, { database: kept.database });
  await development.app.ready();
  t.notMatch(development.logs.text(), /RETENTION_DAYS/, 'no warning outside production');
  const configured = await buildTestApp(t, { env: { ...production, RETENTION_DAYS: '365' }, database: kept.database });
  await configured.app.ready();
  t.notMatch(configured.logs.text(), /RETENTION_DAYS is not set/, 'no warning when set');
});

t.test('RETENTION_DAYS is a whole number of days, at least 1', async (t) => {
  t.equal(loadConfig({ RETENTION_DAYS: '90' }).retentionDays, 90);
  t.equal(loadConfig({}).retentionDays, undefined, 'unset: keep forever');
  t.match(configProblems(loadConfig, { RETENTION_DAYS: '0' }), [/^RETENTION_DAYS: must be at least 1/]);
  t.match(configProblems(loadConfig, { RETENTION_DAYS: '7.5' }), [/^RETENTION_DAYS: must be a (positive )?whole number/]);
});
