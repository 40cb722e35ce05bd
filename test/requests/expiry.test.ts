import { sql } from 'kysely';
import t, { type Test } from 'tap';
import type { DatabaseHandle } from '../../src/db/handle.js';
import { expireOverdue, FULL_SWEEP_EVERY_MS, startExpirySweep, SWEEP_OVERLAP_MS, sweepIntervalMs } from '../../src/requests/expiry.js';
import { buildTestApp } from '../helpers/app.js';
import { anotherConnection, freshDatabase, SERVER_URL } from '../helpers/database.js';
import { databaseBehindRelay } from '../helpers/relay.js';
import { captureLogs } from '../helpers/logs.js';
import { until } from '../helpers/until.js';
import { emptyTables, insertRequest, distinctResult } from '../queries/fixtures.js';

// One database for the file, emptied before each test: a fresh PGlite costs seconds.
const database = await freshDatabase(t);
t.beforeEach(() => emptyTables(database.db));

const NOW = new Date('2026-06-01T12:00:00.000Z');
const TIMEOUT_S = 3600;
const ago = (seconds: number) => new Date(NOW.getTime() - seconds * 1000);

t.test('two instances sweeping at once expire each overdue request exactly once and leave the rest alone', async (t) => {
  const db = database.db;
  const second = await anotherConnection(t, database);

  // 1200 overdue (more than one batch), 30 fresh, and overdue ones in other states.
  await sql`
    insert into underwriting_requests (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, status, submitted_at, updated_at)
    select 'late-' || g, 'h', '***.000.000-**', false, 'submitted', ${ago(TIMEOUT_S + 1)}::timestamptz - g * interval '1 second', ${ago(TIMEOUT_S + 1)}::timestamptz
      from generate_series(1, 1200) as g`.execute(db);
  const fresh = [];
  for (let i = 0; i < 30; i++) fresh.push(await insertRequest(db, { customerUuid: `fresh-${i}`, submittedAt: ago(TIMEOUT_S - 1 - i) }));
  const atTheLimit = await insertRequest(db, { customerUuid: 'exactly', submittedAt: ago(TIMEOUT_S) });
  const failed = await insertRequest(db, { customerUuid: 'failed', status: 'submit_failed', submittedAt: ago(TIMEOUT_S * 2) });
  const done = await insertRequest(db, { customerUuid: 'done', submittedAt: ago(TIMEOUT_S * 2), result: distinctResult('done') });
  const submitting = await insertRequest(db, { customerUuid: 'submitting', status: 'submitting', submittedAt: ago(TIMEOUT_S - 1) });
  const overdue = (
    await db.selectFrom('underwriting_requests').select('id').where('customer_uuid', 'like', 'late-%').orderBy('id').execute()
  ).map((r) => r.id);

  const [a, b] = await Promise.all([expireOverdue(db, NOW, TIMEOUT_S), expireOverdue(second.db, NOW, TIMEOUT_S)]);
  const all = [...a, ...b].sort((x, y) => x - y);
  t.equal(all.length, 1200, 'each overdue request counted once');
  t.same(all, overdue, 'and no other');

  const rows = await db.selectFrom('underwriting_requests').select(['id', 'status', 'updated_at']).execute();
  const byId = new Map(rows.map((r) => [r.id, r]));
  t.ok(overdue.every((id) => byId.get(id)?.status === 'expired' && byId.get(id)?.updated_at.getTime() === NOW.getTime()));
  t.ok(fresh.every((id) => byId.get(id)?.status === 'submitted'), 'fresh ones untouched');
  t.equal(byId.get(atTheLimit)?.status, 'submitted', 'exactly at the timeout is not yet overdue');
  t.equal(byId.get(failed)?.status, 'submit_failed');
  t.equal(byId.get(done)?.status, 'completed');
  t.equal(byId.get(submitting)?.status, 'submitting');

  t.same(await expireOverdue(db, NOW, TIMEOUT_S), [], 'a second sweep finds nothing');
});

t.test('an expired request is shown as expired and a late callback still completes it', async (t) => {
  const { app } = await buildTestApp(t, { database });
  await insertRequest(database.db, { customerUuid: 'late-answer', submittedAt: ago(TIMEOUT_S + 60) });
  await expireOverdue(database.db, NOW, TIMEOUT_S);
  const expired = await app.inject({ method: 'GET', url: '/v1/underwritings/late-answer' });
  t.match(expired.json(), { status: 'expired', result: null });
  const listed = await app.inject({ method: 'GET', url: '/v1/underwritings?status=expired' });
  t.same(listed.json().items.map((i: { customerUuid: string }) => i.customerUuid), ['late-answer']);

  const body = distinctResult('late-answer');
  const callback = await app.inject({ method: 'POST', url: '/v1/callbacks/underwriting', payload: body });
  t.equal(callback.statusCode, 200);
  const completed = await app.inject({ method: 'GET', url: '/v1/underwritings/late-answer' });
  t.match(completed.json(), { status: 'completed', decision: 'approved', result: body });
});

t.test('the sweep uses the app clock, counts what it expired and logs it', async (t) => {
    await insertRequest(database.db, { customerUuid: 'swept', submittedAt: ago(TIMEOUT_S + 5) });
  const logs = captureLogs();
  let counted = 0;
  const sweep = startExpirySweep({
    db: database.db,
    clock: () => NOW,
    timeoutS: TIMEOUT_S,
    stuckAfterS: TIMEOUT_S,
    log: logs.logger,
    onExpired: (n) => (counted += n),
  });
  t.teardown(() => sweep.stop());
  await sweep.run();
  t.equal(counted, 1);
  t.match(logs.entries().find((e) => e.msg === 'expired requests whose callback never came'), { count: 1, timeoutS: TIMEOUT_S });
  await sweep.run();
  t.equal(counted, 1, 'nothing twice');
});

t.test('a sweep against an unreachable database logs and carries on', async (t) => {
  const gone = await unreachableDatabase(t);
  const logs = captureLogs();
  const sweep = startExpirySweep({
    db: gone.db,
    clock: () => NOW,
    timeoutS: TIMEOUT_S,
    stuckAfterS: TIMEOUT_S,
    log: logs.logger,
    onExpired: () => t.fail('nothing to expire'),
  });
  t.teardown(() => sweep.stop());
  await sweep.run();
  t.match(logs.entries().find((e) => e.msg === 'expiry sweep skipped: database unavailable'), { level: 'warn' });
});

/** A migrated database that then goes away: PostgreSQL behind a cut relay, or a closed PGlite. */
async function unreachableDatabase(t: Test): Promise<DatabaseHandle> {
  if (!SERVER_URL) {
    const closed = await freshDatabase(t);
    await closed.pglite!.close();
    return closed;
  }
  const { database: relayed, relay, url } = await databaseBehindRelay(t);
  relay.cut();
  return relayed;
}

t.test('the sweep runs every quarter of the timeout, at most every 30 s', async (t) => {
  t.equal(sweepIntervalMs(3600), 30_000);
  t.equal(sweepIntervalMs(60), 15_000);
  t.equal(sweepIntervalMs(1), 250);
});

t.test('pending requests and expirations appear in the metrics', async (t) => {
  const { app } = await buildTestApp(t, { database, clock: () => NOW });
  await insertRequest(database.db, { customerUuid: 'p-1' });
  await insertRequest(database.db, { customerUuid: 'p-2', status: 'submitting' });
  await insertRequest(database.db, { customerUuid: 'p-3', result: distinctResult('p-3') });
  const res = await app.inject({ method: 'GET', url: '/metrics' });
  t.match(res.body, /underwriting_pending_requests 2\b/);
  t.match(res.body, /underwriting_expired_total 0\b/);
  t.match(res.body, /underwriting_longpoll_waiters 0\b/);
});

t.test("each instance's own periodic sweep expires overdue requests and counts them", async (t) => {
  const { app } = await buildTestApp(t, { database, env: { CALLBACK_TIMEOUT_S: '1' }, clock: () => NOW });
  const id = await insertRequest(database.db, { customerUuid: 'periodic', submittedAt: ago(5) });
  await app.ready();
  // The counter moves once the whole sweep is done, after the row: wait for it, then look at the row.
  const metrics = await until(
    async () => {
      const { body } = await app.inject({ method: 'GET', url: '/metrics' });
      return /underwriting_expired_total 1\b/.test(body) && body;
    },
    10_000,
    'underwriting_expired_total 1',
  );
  t.match(metrics, /underwriting_expired_total 1\b/);
  const { status } = await database.db.selectFrom('underwriting_requests').select('status').where('id', '=', id).executeTakeFirstOrThrow();
  t.equal(status, 'expired');
});

t.test('a request abandoned in submitting is released as submit_failed by the sweep past the abandoned bound, long before the callback timeout', async (t) => {
  const db = database.db;
  const ABANDONED_S = 20;
  const abandoned = await insertRequest(db, { customerUuid: 'abandoned', status: 'submitting', upstreamStatus: null, submittedAt: ago(ABANDONED_S + 1) });
  const young = await insertRequest(db, { customerUuid: 'young', status: 'submitting', upstreamStatus: null, submittedAt: ago(ABANDONED_S - 1) });
  const waiting = await insertRequest(db, { customerUuid: 'waiting', status: 'submitted', submittedAt: ago(ABANDONED_S + 1) });
  const logs = captureLogs();
  const sweep = startExpirySweep({
    db,
    clock: () => NOW,
    timeoutS: TIMEOUT_S,
    stuckAfterS: ABANDONED_S,
    log: logs.logger,
    onExpired: () => t.fail('nothing expires'),
  });
  t.teardown(() => sweep.stop());
  await sweep.run();
  const rows = await db.selectFrom('underwriting_requests').select(['id', 'status', 'upstream_error']).where('id', 'in', [abandoned, young, waiting]).execute();
  const byId = new Map(rows.map((r) => [r.id, r]));
  t.match(byId.get(abandoned), { status: 'submit_failed', upstream_error: /^abandoned/ });
  t.equal(byId.get(young)?.status, 'submitting', 'a submit may still be live');
  t.equal(byId.get(waiting)?.status, 'submitted', 'a request the provider has waits for its callback timeout');
  t.match(logs.entries(), [{ msg: 'released abandoned submits: stored as submit_failed', count: 1 }]);
});

/** A sweep on `database` whose clock the test moves. */
function movableSweep(t: Test, db: DatabaseHandle['db'], start: Date, stuckAfterS: number) {
  let now = start;
  const logs = captureLogs();
  const sweep = startExpirySweep({ db, clock: () => now, timeoutS: TIMEOUT_S, stuckAfterS, log: logs.logger, onExpired: () => {} });
  t.teardown(() => sweep.stop());
  return { sweep, at: (ms: number) => (now = new Date(start.getTime() + ms)) };
}

const statusOf = async (id: number) =>
  (await database.db.selectFrom('underwriting_requests').select('status').where('id', '=', id).executeTakeFirstOrThrow()).status;

t.test('a pass reads what was submitted since the previous cutoffs less the overlap; the hourly pass from the beginning ends what lay before', async (t) => {
  const db = database.db;
  const STUCK_S = 20;
  const { sweep, at } = movableSweep(t, db, NOW, STUCK_S);
  await sweep.run(); // the start's pass, from the beginning: nothing due yet
  // Stored after that pass with times it had already passed (a clock far behind, a row held past
  // the overlap): the next passes do not read back that far.
  const lateWaiting = await insertRequest(db, { customerUuid: 'late-w', submittedAt: ago(TIMEOUT_S + SWEEP_OVERLAP_MS / 1000 + 60) });
  const lateSubmitting = await insertRequest(db, { customerUuid: 'late-s', status: 'submitting', upstreamStatus: null, submittedAt: ago(STUCK_S + SWEEP_OVERLAP_MS / 1000 + 60) });
  // Within the overlap: the next pass ends them.
  const waiting = await insertRequest(db, { customerUuid: 'w', submittedAt: ago(TIMEOUT_S + SWEEP_OVERLAP_MS / 1000 - 60) });
  const submitting = await insertRequest(db, { customerUuid: 's', status: 'submitting', upstreamStatus: null, submittedAt: ago(STUCK_S + SWEEP_OVERLAP_MS / 1000 - 60) });
  at(30_000);
  await sweep.run();
  t.same([await statusOf(waiting), await statusOf(submitting)], ['expired', 'submit_failed'], 'within the overlap: ended');
  t.same([await statusOf(lateWaiting), await statusOf(lateSubmitting)], ['submitted', 'submitting'], 'before it: not read');
  at(FULL_SWEEP_EVERY_MS - 1);
  await sweep.run();
  t.same([await statusOf(lateWaiting), await statusOf(lateSubmitting)], ['submitted', 'submitting'], 'not yet an hour');
  at(FULL_SWEEP_EVERY_MS);
  await sweep.run();
  t.same([await statusOf(lateWaiting), await statusOf(lateSubmitting)], ['expired', 'submit_failed'], 'an hour after the last pass from the beginning: ended');
});

t.test('a pass that stopped half way leaves the next one to read again from where it began', async (t) => {
  const db = database.db;
  const { sweep, at } = movableSweep(t, db, NOW, 20);
  await sweep.run();
  // Due a second after that pass's cutoff.
  const old = await insertRequest(db, { customerUuid: 'old', submittedAt: ago(TIMEOUT_S - 1) });
  // The next pass fails (its table gone a moment) and ends nothing; had it counted, the one after
  // would read only from its cutoff less the overlap, past `old`.
  at(SWEEP_OVERLAP_MS + 60_000);
  await sql`alter table underwriting_requests rename to underwriting_requests_away`.execute(db);
  try {
    await sweep.run();
  } finally {
    await sql`alter table underwriting_requests_away rename to underwriting_requests`.execute(db);
  }
  t.equal(await statusOf(old), 'submitted', 'the failed pass ended nothing');
  at(SWEEP_OVERLAP_MS + 90_000);
  await sweep.run();
  t.equal(await statusOf(old), 'expired', "read from the last good pass's cutoff, not from the failed one's");
});

t.test('a pass that met more abandoned requests than it ends at once leaves the next one to read from where it began', async (t) => {
  const db = database.db;
  const STUCK_S = 20;
  const { sweep, at } = movableSweep(t, db, NOW, STUCK_S);
  await sweep.run();
  // 1001 abandoned a second after that pass's cutoff: one more than a pass ends.
  await sql`
    insert into underwriting_requests (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, status, submitted_at, updated_at)
    select 'stuck-' || g, 'h', '***.000.000-**', false, 'submitting', ${ago(STUCK_S - 1)}::timestamptz, ${ago(STUCK_S - 1)}::timestamptz
      from generate_series(1, 1001) as g`.execute(db);
  const left = () => db.selectFrom('underwriting_requests').select('id').where('status', '=', 'submitting').execute();
  at(SWEEP_OVERLAP_MS + 60_000);
  await sweep.run();
  t.equal((await left()).length, 1, 'a thousand ended');
  at(SWEEP_OVERLAP_MS + 90_000);
  await sweep.run();
  t.equal((await left()).length, 0, "the last one by the next pass, read from the last complete pass's cutoff");
});

// PostgreSQL only: PGlite has one connection, so no other transaction holds a row during a pass.
if (SERVER_URL) t.test('a row another transaction held during a pass (skipped) and left as it was is ended by a later pass', async (t) => {
  const db = database.db;
  const { sweep, at } = movableSweep(t, db, NOW, 20);
  const held = await insertRequest(db, { customerUuid: 'held', submittedAt: ago(TIMEOUT_S + 1) });
  const holder = await anotherConnection(t, database);
  await holder.db.connection().execute(async (conn) => {
    await sql`begin`.execute(conn);
    await sql`select id from underwriting_requests where id = ${held} for update`.execute(conn);
    await sweep.run();
    t.equal(await statusOf(held), 'submitted', 'skipped while held');
    await sql`rollback`.execute(conn);
  });
  at(30_000);
  await sweep.run();
  t.equal(await statusOf(held), 'expired', 'ended by the next pass');
});
