import { sql } from 'kysely';
import t from 'tap';
import { ensureSlots, returnSlot } from '../../src/provider/sql.js';
import type { NewSubmission } from '../../src/requests/sql.js';
import { submitWrites } from '../../src/submissions/writes.js';
import { freshDatabase, holdTable } from '../helpers/database.js';

// A synchronous submit's two writes as group commits (src/submissions/writes.ts), driven directly so
// that batches can be arranged: with one batch in flight, the first submit is written alone and
// every one that comes meanwhile shares the next statement.

const { db } = await freshDatabase(t);
const ONE_AT_A_TIME = { inFlight: 1, batchSize: 64 };
let next = 0;

function submission(customerUuid = `writes-${++next}`): NewSubmission {
  return {
    customerUuid,
    cpfHash: `hash-${customerUuid}`,
    cpfMasked: '***.456.789-**',
    costSavingEnabled: false,
    srd: next % 2 === 0 ? { grossIncome: 5000, note: 'quote " and \\ kept' } : undefined,
    idempotencyKey: undefined,
    now: new Date(),
    traceparent: null,
    xRequestId: `req-${customerUuid}`,
  };
}

function writesSeeingBatches() {
  const batches: Array<[string, number]> = [];
  const writes = submitWrites(db, { limits: ONE_AT_A_TIME, onBatch: (statement, size) => batches.push([statement, size]) });
  return { writes, batches };
}

const rowsOf = async (ids: number[]) =>
  (await sql<{ id: string; customer_uuid: string; status: string; srd: unknown; upstream_status: number | null }>`
    select id, customer_uuid, status, srd, upstream_status from underwriting_requests where id = any(${ids}::bigint[]) order by id`.execute(db)).rows;

t.test('submits stored while a batch is written share the next statement, each with its own row', async (t) => {
  const { writes, batches } = writesSeeingBatches();
  const submissions = Array.from({ length: 12 }, () => submission());
  const stored = await Promise.all(submissions.map((s) => writes.store(s, undefined)));
  t.same(batches, [['insert_submitting', 1], ['insert_submitting', 11]], 'the first alone, the other eleven in one statement');

  const rows = await rowsOf(stored.map((s) => s!.id));
  t.equal(rows.length, 12, 'twelve rows');
  for (const [i, s] of submissions.entries()) {
    const row = rows.find((r) => Number(r.id) === stored[i]!.id)!;
    t.match(row, { customer_uuid: s.customerUuid, status: 'submitting' }, 'each answer names its own row');
    t.same(row.srd, s.srd ?? null, 'the srd as sent (quotes and backslashes kept)');
    t.equal(stored[i]!.submittedAt, s.now);
  }

  const accepted = await Promise.all(stored.map((s, i) => writes.accept({ id: s!.id, upstreamStatus: 200 + i, now: new Date(), slot: undefined }, undefined)));
  t.equal(accepted.length, 12);
  t.same(batches.slice(2), [['mark_submitted', 1], ['mark_submitted', 11]], 'the acceptances too');
  const after = await rowsOf(stored.map((s) => s!.id));
  t.same(stored.map((s) => after.find((r) => Number(r.id) === s!.id)).map((r) => [r!.status, r!.upstream_status]), stored.map((_, i) => ['submitted', 200 + i]), 'each its own status');
});

t.test('a customer with a request in flight is not stored again, in the same batch or a later one; the others are', async (t) => {
  const { writes, batches } = writesSeeingBatches();
  const held = submission();
  const first = await writes.store(held, undefined);
  t.ok(first, 'stored');

  const [again, other, sameBatch, twice] = await Promise.all([
    writes.store({ ...held, now: new Date() }, undefined),
    writes.store(submission(), undefined),
    writes.store(submission('writes-pair'), undefined),
    writes.store(submission('writes-pair'), undefined),
  ]);
  t.equal(again, null, 'in flight already: nothing stored');
  t.ok(other, 'another customer in the same batch is stored');
  t.ok(sameBatch, 'the first of a pair is stored');
  t.equal(twice, null, 'the second of the pair waits for the next batch, and meets the first in flight');
  const later = batches.slice(1).map(([, size]) => size);
  t.equal(later.reduce((a, b) => a + b, 0), 4, 'four stores');
  t.equal(later.at(-1), 1, 'the second of the pair went alone, after the batch of the first');
});

t.test('an acceptance gives its call\'s slot back in its own commit, and an answer after failures closes the circuit', async (t) => {
  const { writes } = writesSeeingBatches();
  // The slots are leased by hand: this test is about what an acceptance gives back, not about the
  // take. A take of two at the first instant of a second (or of its tail) starts one call only,
  // whatever the rate (call n of the spread starts n * 700 / limit ms in), and PGlite's clock reads
  // whole milliseconds: CI once got [0] for [0, 1].
  await ensureSlots(db, 4);
  const holder = 'writes-test:1';
  const lease = (slot: number, by: string) =>
    sql`update provider_slots set lease_until = clock_timestamp() + interval '60 seconds', holder = ${by} where slot = ${slot}`.execute(db);
  await lease(0, holder);
  await lease(1, holder);
  const leased = async () => (await sql<{ slot: number }>`select slot from provider_slots where lease_until > clock_timestamp() order by slot`.execute(db)).rows.map((r) => r.slot);
  t.same(await leased(), [0, 1], 'two slots leased');

  // Two failures, not yet the threshold: the shared row counts them.
  for (const slot of [2, 3]) {
    await lease(slot, `writes-test:${slot}`);
    await returnSlot(db, { slot, holder: `writes-test:${slot}`, outcome: 'failed', probe: false, holdS: null, circuitFailures: 3, circuitOpenS: 30 });
  }
  const failures = async () => (await sql<{ failures: number }>`select failures from provider_pacing where id = 1`.execute(db)).rows[0]!.failures;
  t.equal(await failures(), 2);

  const stored = await writes.store(submission(), undefined);
  await writes.accept({ id: stored!.id, upstreamStatus: 202, now: new Date(), slot: { slot: 0, holder } }, undefined);
  t.same(await leased(), [1], 'slot 0 is free again; slot 1 still leased');
  t.equal(await failures(), 0, 'the answer reset the failures');

  const wrongHolder = await writes.store(submission(), undefined);
  await writes.accept({ id: wrongHolder!.id, upstreamStatus: 202, now: new Date(), slot: { slot: 1, holder: 'someone-else' } }, undefined);
  t.same(await leased(), [1], 'a slot is freed only by its holder');
  t.match((await rowsOf([wrongHolder!.id]))[0], { status: 'submitted' }, 'the acceptance is recorded all the same');
});

t.test('an acceptance of a row that is gone is an error; the others are recorded', async (t) => {
  const { writes } = writesSeeingBatches();
  const kept = await writes.store(submission(), undefined);
  const gone = await writes.store(submission(), undefined);
  await sql`delete from underwriting_requests where id = ${gone!.id}`.execute(db);
  const results = await Promise.allSettled([
    writes.accept({ id: kept!.id, upstreamStatus: 202, now: new Date(), slot: undefined }, undefined),
    writes.accept({ id: gone!.id, upstreamStatus: 202, now: new Date(), slot: undefined }, undefined),
  ]);
  t.equal(results[0].status, 'fulfilled');
  t.match(results[1], { status: 'rejected', reason: { message: /vanished/ } });
  t.match((await rowsOf([kept!.id]))[0], { status: 'submitted' });
});

t.test('a store still queued after its limit fails unwritten, and is never stored later; an acceptance waits however long', async (t) => {
  const batches: Array<[string, number]> = [];
  const writes = submitWrites(db, { limits: ONE_AT_A_TIME, storeQueueLimitMs: 100, onBatch: (statement, size) => batches.push([statement, size]) });
  const accepted = await writes.store(submission(), undefined);

  // The database slowed, not failing: a transaction holds the requests' table.
  const lock = await holdTable(db, 'underwriting_requests');

  const [sent, queued] = [submission(), submission()];
  const first = writes.store(sent, undefined);
  // An acceptance in flight and one queued behind it, as long as the store queued with them.
  const accepting = writes.accept({ id: accepted!.id, upstreamStatus: 200, now: new Date(), slot: undefined }, undefined);
  let settled = false;
  const acceptedToo = writes.accept({ id: accepted!.id, upstreamStatus: 201, now: new Date(), slot: undefined }, undefined).finally(() => (settled = true));
  const late = await Promise.allSettled([writes.store(queued, undefined)]);
  t.match(late, [{ status: 'rejected', reason: { name: 'QueuedTooLongError' } }]);
  t.equal(settled, false, 'the queued acceptance is still waiting, past the store limit');
  await lock.release();
  t.ok(await first, 'the store already sent is written once the lock is gone');
  await Promise.all([accepting, acceptedToo]);
  await writes.close();
  const stored = (await sql<{ customer_uuid: string }>`select customer_uuid from underwriting_requests where customer_uuid in (${sent.customerUuid}, ${queued.customerUuid})`.execute(db)).rows;
  t.same(stored.map((r) => r.customer_uuid), [sent.customerUuid], 'the expired store left no row');
  t.match(batches.filter(([s]) => s === 'mark_submitted'), [['mark_submitted', 1], ['mark_submitted', 1]], 'both acceptances went to the database');
});
