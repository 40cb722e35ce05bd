import type { FastifyInstance } from 'fastify';
import { type Kysely, sql } from 'kysely';
import t from 'tap';
import { closingHorizon, closingPass } from '../../src/aggregates/closing.js';
import { CLOSING_LOCK_ID } from '../../src/aggregates/sql.js';
import type { Tables } from '../../src/db/types.js';
import { purgePass } from '../../src/retention/sweep.js';
import { resultBody, postCallback } from '../callbacks/fixtures.js';
import { adminApp, post } from '../personal-data/fixtures.js';
import { anotherConnection, freshDatabase } from '../helpers/database.js';
import { insertRow, insertStray } from './fixtures.js';

// Closed hours (issue 34, docs/operations.md): an hour none of whose requests awaits the provider is
// folded into the aggregates and read from them alone. The answers must not change for it, and
// whatever still reaches a closed hour (a late callback, erasure, retention) must keep them right:
// every step below runs on a gateway whose hours are closed and on one whose hours never are, and
// both must answer alike.

const NOW = new Date('2026-11-23T04:30:00Z');
const at = (iso: string) => new Date(iso);
const RANGES = [
  'since=2026-11-21T00:00:00Z&until=2026-11-24T00:00:00Z&bucket=day',
  'since=2026-11-21T04:00:00Z&until=2026-11-23T05:00:00Z&bucket=hour',
];

/** The same rows in each database: every status, the four decisions, spread turnarounds, stray callbacks. */
async function seed(db: Kysely<Tables>): Promise<void> {
  const statuses = ['completed', 'completed', 'completed', 'expired', 'submit_failed', 'cancelled'] as const;
  const decisions = ['approved', 'declined', 'no_score', 'filtered'] as const;
  for (let i = 0; i < 72; i++) {
    await insertRow(db, {
      customerUuid: `close-${i}`,
      status: statuses[i % 6]!,
      decision: decisions[i % 4]!,
      submittedAt: new Date(at('2026-11-21T06:00:00Z').getTime() + i * 37 * 60_000),
      turnaroundMs: 400 * (i + 1) ** 2,
    });
  }
  // Expired and failed, to be completed late; and one still awaiting its callback (its hour stays open).
  await insertRow(db, { customerUuid: 'late-expired', status: 'expired', submittedAt: '2026-11-22T10:05:00Z' });
  await insertRow(db, { customerUuid: 'late-failed', status: 'submit_failed', submittedAt: '2026-11-22T11:15:00Z' });
  await insertRow(db, { customerUuid: 'waiting', status: 'submitted', submittedAt: '2026-11-22T15:10:00Z' });
  await insertRow(db, { customerUuid: 'waiting-hour', status: 'completed', submittedAt: '2026-11-22T15:40:00Z', turnaroundMs: 90_000 });
  // This hour and the last are too recent to close.
  await insertRow(db, { customerUuid: 'recent-1', status: 'completed', submittedAt: '2026-11-23T04:05:00Z', turnaroundMs: 2_000 });
  await insertRow(db, { customerUuid: 'recent-2', status: 'submitted', submittedAt: '2026-11-23T04:27:00Z' });
  await insertRow(db, { customerUuid: 'recent-3', status: 'expired', submittedAt: '2026-11-23T03:50:00Z' });
  // Stray callbacks in the open hour and in the current one, before 3 minutes ago (folded).
  await insertStray(db, 'unmatched', at('2026-11-22T15:20:00Z'), { customerUuid: 'stray-open' });
  await insertStray(db, 'invalid', at('2026-11-23T04:12:00Z'), { customerUuid: 'stray-now' });
  for (let i = 0; i < 12; i++) {
    await insertStray(db, i % 3 ? 'unmatched' : 'invalid', new Date(at('2026-11-21T07:00:00Z').getTime() + i * 3.5 * 3600_000), { customerUuid: `stray-${i}` });
  }
}

async function answers(app: FastifyInstance): Promise<unknown[]> {
  const out = [];
  for (const range of RANGES) {
    const res = await app.inject({ url: `/v1/stats?${range}` });
    if (res.statusCode !== 200) throw new Error(`${res.statusCode} ${res.body}`);
    out.push(res.json().buckets);
  }
  return out;
}

const watermark = async (db: Kysely<Tables>, iso: string) =>
  (await sql<{ folded_until: Date | null }>`select folded_until from statistics_hourly where hour = ${at(iso)}`.execute(db)).rows[0]?.folded_until;
const listed = async (db: Kysely<Tables>) =>
  (await sql<{ customer_uuid: string }>`
    select r.customer_uuid from statistics_unfolded u join underwriting_requests r on r.id = u.request_id order by 1`.execute(db)).rows.map((r) => r.customer_uuid);

/** The closing statement of the version before migration 0028 (as of bbb5692), on one hour: rows it updated. */
async function olderClose(db: Kysely<Tables>, hour: Date): Promise<number> {
  const end = new Date(hour.getTime() + 3600_000);
  const { numAffectedRows } = await sql`
    with live as (
      select count(*) as submitted, count(*) filter (where r.status = 'completed') as completed,
             count(*) filter (where r.status = 'expired') as expired, count(*) filter (where r.status = 'submit_failed') as submit_failed,
             count(*) filter (where r.decision = 'approved') as approved, count(*) filter (where r.decision = 'declined') as declined,
             count(*) filter (where r.decision = 'no_score') as no_score, count(*) filter (where r.decision = 'filtered') as filtered,
             count(*) filter (where r.status in ('queued', 'submitting', 'submitted')) as awaiting
        from underwriting_requests r where r.submitted_at >= ${hour} and r.submitted_at < ${end}
    ),
    stray as (
      select count(*) filter (where c.outcome = 'unmatched') as unmatched, count(*) filter (where c.outcome = 'invalid') as invalid
        from callbacks c where c.outcome in ('unmatched', 'invalid') and c.received_at >= ${hour} and c.received_at < ${end}
    )
    update statistics_hourly s
       set submitted = s.submitted + l.submitted, completed = s.completed + l.completed,
           expired = s.expired + l.expired, submit_failed = s.submit_failed + l.submit_failed,
           approved = s.approved + l.approved, declined = s.declined + l.declined,
           no_score = s.no_score + l.no_score, filtered = s.filtered + l.filtered,
           unmatched = s.unmatched + c.unmatched, invalid = s.invalid + c.invalid, closed_at = ${NOW}
      from live l, stray c
     where s.hour = ${hour} and s.closed_at is null and l.awaiting = 0
       and not exists (select 1 from underwriting_requests q where q.status = 'submitting' and q.queued_at >= ${hour} and q.queued_at < ${end})`.execute(db);
  return Number(numAffectedRows ?? 0n);
}

const closedHours = async (db: Kysely<Tables>) =>
  Number((await sql<{ n: string }>`select count(*)::text as n from statistics_hourly where closed_at is not null`.execute(db)).rows[0]!.n);

t.test('closing hours changes no answer, and a late callback, an erasure and retention after it keep them right', async (t) => {
  const open = await adminApp(t, { clock: () => NOW });
  const closed = await adminApp(t, { clock: () => NOW });
  const both = [open, closed];
  for (const { database } of both) await seed(database.db);
  const before = await answers(closed.app);
  t.same(await answers(open.app), before, 'the two gateways start alike');

  await closed.app.statisticsClosing.run();
  const n = await closedHours(closed.database.db);
  t.ok(n > 40, `hours closed (${n})`);
  const hour = async (iso: string) =>
    (await sql<{ closed_at: Date | null }>`select closed_at from statistics_hourly where hour = ${at(iso)}`.execute(closed.database.db)).rows[0];
  t.ok((await hour('2026-11-22T15:00:00Z'))?.closed_at === null, 'the hour of a request awaiting its callback stays open');
  t.ok((await hour('2026-11-23T03:00:00Z'))?.closed_at, 'an hour that ended 30 minutes ago is closed');
  t.notOk((await hour('2026-11-23T04:00:00Z'))?.closed_at, 'the current hour is not');
  t.same(await answers(closed.app), before, 'the same answers once closed: counts, decisions, percentiles, stray callbacks');
  // Open hours are folded up to 3 minutes ago (04:27), but for what still awaits the provider.
  t.same(await watermark(closed.database.db, '2026-11-22T15:00:00Z'), at('2026-11-22T16:00:00Z'), 'the open hour is folded to its end');
  t.same(await watermark(closed.database.db, '2026-11-23T04:00:00Z'), at('2026-11-23T04:27:00Z'), 'the current hour up to 3 minutes ago');
  t.same(await listed(closed.database.db), ['waiting'], 'the request awaiting its callback below a watermark is listed');

  // The listed request answered, a folded one of the same open hour erased: read by id, taken off the counts.
  for (const { app } of both) {
    const res = await postCallback(app, resultBody('waiting', { started: '2026-11-22T15:11:00Z', finished: '2026-11-22T15:12:00Z', limit: 2000 }));
    t.equal(res.statusCode, 200);
    for (const customerUuid of ['waiting-hour', 'stray-open']) t.equal((await post(app, '/v1/personal-data/erase', { customerUuid })).statusCode, 200);
  }
  const answered = await answers(closed.app);
  t.same(answered, await answers(open.app), 'a listed request answered, a folded one and a folded stray callback erased: the same answers');
  t.not(JSON.stringify(answered), JSON.stringify(before), 'and they changed them');

  // An instance of the version before 0028, still running during a rolling deploy, closes an hour
  // by adding all its rows: on a folded hour that is skipped (migration 0029), not counted twice.
  const closedBefore0028 = await olderClose(closed.database.db, at('2026-11-22T15:00:00Z'));
  t.equal(closedBefore0028, 0, "an older instance's close of a folded hour changes no row");
  t.same(await answers(closed.app), answered, 'and no answer');

  // Late callbacks complete the expired and the failed request, both in closed hours.
  for (const { app } of both) {
    for (const [customerUuid, started, limit] of [['late-expired', '2026-11-22T10:06:00Z', 3000], ['late-failed', '2026-11-22T11:16:00Z', 0]] as const) {
      const res = await postCallback(app, resultBody(customerUuid, { started, finished: new Date(Date.parse(started) + 5000).toISOString(), limit }));
      t.equal(res.statusCode, 200);
      t.equal(res.json().received, true);
    }
  }
  const late = await answers(closed.app);
  t.same(late, await answers(open.app), 'late callbacks: the same answers as a gateway that never closed an hour');
  t.not(JSON.stringify(late), JSON.stringify(before), 'and they changed them');

  // An erasure of a subject with requests and a stray callback in closed hours.
  for (const { app } of both) {
    for (const customerUuid of ['close-3', 'close-7', 'stray-4', 'late-expired']) {
      const res = await post(app, '/v1/personal-data/erase', { customerUuid });
      t.equal(res.statusCode, 200, `erased ${customerUuid}`);
    }
  }
  t.same(await answers(closed.app), await answers(open.app), 'erasure: the same answers');

  // Retention purges a day and a half; closing again closes what retention left open.
  for (const { database } of both) await purgePass(database.db, NOW, 1);
  t.same(await answers(closed.app), await answers(open.app), 'retention: the same answers');
  await closed.app.statisticsClosing.run();
  const last = await answers(closed.app);
  t.same(last, await answers(open.app), 'a second pass: the same answers');
  t.ok((await hour('2026-11-22T15:00:00Z'))?.closed_at, 'it folded the answered request and closed its hour');
  t.same(await listed(closed.database.db), [], 'nothing is listed any more');

  // A closed hour is read from its aggregates alone: a row written into it behind the gateway's back is not seen.
  await insertRow(closed.database.db, { customerUuid: 'behind', status: 'completed', submittedAt: '2026-11-22T09:30:00Z' });
  t.same(await answers(closed.app), last, 'a closed hour is not read row by row');
  // Nor the folded part of an open hour.
  await insertRow(closed.database.db, { customerUuid: 'behind-open', status: 'completed', submittedAt: '2026-11-23T04:10:00Z' });
  await insertStray(closed.database.db, 'unmatched', at('2026-11-23T04:11:00Z'), { customerUuid: 'behind-stray' });
  t.same(await answers(closed.app), last, 'an open hour is not read row by row below its watermarks');
  await insertRow(closed.database.db, { customerUuid: 'above-open', status: 'completed', submittedAt: '2026-11-23T04:28:00Z' });
  t.not(JSON.stringify(await answers(closed.app)), JSON.stringify(last), 'and is above it');
});

t.test('two instances closing at once count every row once', async (t) => {
  const database = await freshDatabase(t);
  const other = await anotherConnection(t, database);
  const reference = await adminApp(t, { clock: () => NOW });
  await seed(database.db);
  await seed(reference.database.db);
  const closed = await Promise.all([closingPass(database.db, NOW), closingPass(other.db, NOW)]);
  t.ok(closed[0] + closed[1] > 40, `hours closed: ${closed.join(' + ')}`);
  t.equal(await closedHours(database.db), closed[0] + closed[1], 'each hour closed by one of them');
  const { app } = await adminApp(t, { clock: () => NOW, database });
  t.same(await answers(app), await answers(reference.app));
});

t.test("the triggers of migration 0022 take the closing pass's lock", async (t) => {
  const { db } = await freshDatabase(t);
  const { rows } = await sql<{ proname: string; prosrc: string }>`
    select proname, prosrc from pg_proc where proname like 'statistics_closed_%' and prorettype = 'trigger'::regtype`.execute(db);
  t.equal(rows.length, 3);
  for (const row of rows) t.match(row.prosrc, `pg_advisory_xact_lock_shared(${CLOSING_LOCK_ID})`, row.proname);
});

t.test('a request being sent keeps only the hour it was queued in open, and returns there counted once', async (t) => {
  const closed = await adminApp(t, { clock: () => NOW });
  const open = await adminApp(t, { clock: () => NOW });
  const queuedAt = '2026-11-21T06:10:00Z';
  for (const { database } of [closed, open]) {
    // The apps' forwarders would claim the request once it is queued again below, and end it
    // submit_failed (it has no sealed body) before the pass: its hour then closed (CI, under load).
    await sql`update provider_pacing set hold_until = 'infinity'`.execute(database.db);
    await seed(database.db);
    // A campaign request queued two days ago, claimed now (being sent: its submitted_at the claim's time).
    // Claimed 15 minutes ago: below the current hour's watermark once folded, so it is listed there.
    await insertRow(database.db, { customerUuid: 'sending', status: 'submitting', submittedAt: '2026-11-23T04:15:00Z' });
    await sql`update underwriting_requests set queued_at = ${at(queuedAt)} where customer_uuid = 'sending'`.execute(database.db);
  }
  await closingPass(closed.database.db, NOW);
  const hour = async (iso: string) =>
    (await sql<{ closed_at: Date | null }>`select closed_at from statistics_hourly where hour = ${at(iso)}`.execute(closed.database.db)).rows[0];
  t.equal((await hour('2026-11-21T06:00:00Z'))?.closed_at, null, 'the hour it was queued in stays open (it may return there)');
  t.ok((await hour('2026-11-22T10:00:00Z'))?.closed_at, 'a later hour closes all the same');
  t.ok((await hour('2026-11-23T03:00:00Z'))?.closed_at, 'and the last closable one');
  t.ok((await closedHours(closed.database.db)) > 40, 'every other closable hour is closed');
  t.same(await answers(closed.app), await answers(open.app), 'the same answers while it is being sent');
  t.same(await watermark(closed.database.db, '2026-11-21T06:00:00Z'), at(queuedAt), 'the hour it was queued in is folded up to its queue time, no further');
  t.same(await listed(closed.database.db), ['sending', 'waiting'], 'it is listed in the hour it is being sent in');

  // The provider certainly did not receive it: back to the queue, to the hour it was queued in.
  for (const { database } of [closed, open]) {
    await sql`update underwriting_requests set status = 'queued', submitted_at = queued_at where customer_uuid = 'sending'`.execute(database.db);
  }
  t.same(await answers(closed.app), await answers(open.app), 'returned to the queue: counted once, in its queued hour');
  await closingPass(closed.database.db, NOW);
  t.equal((await hour('2026-11-21T06:00:00Z'))?.closed_at, null, 'its hour stays open while it is queued');
  t.same(await watermark(closed.database.db, '2026-11-21T06:00:00Z'), at(queuedAt), 'and folded no further than it');
  t.same(await listed(closed.database.db), ['waiting'], 'its entry in the hour it left is dropped');
  t.same(await answers(closed.app), await answers(open.app), 'and a pass after it changes no answer');
});

t.test("an instance whose clock runs ahead closes no hour the database's clock still writes into; one behind is warned about", async (t) => {
  // Clocks apart: the horizon is the earlier of the instance's and the database's.
  const ahead = await adminApp(t, { clock: () => new Date(Date.now() + 3 * 3600_000) });
  const { rows } = await sql<{ now: Date }>`select statement_timestamp() as now`.execute(ahead.database.db);
  const dbNow = new Date(rows[0]!.now);
  await insertRow(ahead.database.db, { customerUuid: 'ahead', status: 'completed', submittedAt: new Date(dbNow.getTime() - 3 * 3600_000).toISOString() });
  await ahead.app.ready();
  await ahead.app.statisticsClosing.run();
  const { rows: hours } = await sql<{ hour: Date; closed_at: Date | null }>`
    select hour, closed_at from statistics_hourly order by hour`.execute(ahead.database.db);
  const horizon = closingHorizon(dbNow).getTime();
  t.ok(hours.some((h) => h.closed_at !== null), 'hours before the database clock horizon close');
  t.same(hours.filter((h) => new Date(h.hour).getTime() >= horizon && h.closed_at !== null), [], 'none at or after it does');

  const behind = await adminApp(t, { clock: () => new Date(Date.now() - 20 * 60_000) });
  await behind.app.ready();
  await behind.app.statisticsClosing.run();
  const warning = behind.logs.entries().find((e) => String(e.msg).includes("clock runs behind the database's"));
  t.ok(warning, 'a clock 20 minutes behind is warned about');
  t.ok(Number(warning?.behindSeconds) >= 1190, `by how much (${String(warning?.behindSeconds)} s)`);
  t.notOk(ahead.logs.text().includes('clock runs behind'), 'a clock ahead is not (its hours wait for the database)');

  // Past a minute behind, the rows it stamps near the fold's 3 minutes are at risk: warned too.
  const minutes = await adminApp(t, { clock: () => new Date(Date.now() - 90_000) });
  await minutes.app.ready();
  await minutes.app.statisticsClosing.run();
  t.ok(minutes.logs.entries().some((e) => String(e.msg).includes("clock runs behind the database's")), 'a clock 90 s behind is warned about');
});
