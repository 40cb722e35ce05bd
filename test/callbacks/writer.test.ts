import t from 'tap';
import type { Recorded, ValidResult } from '../../src/requests/complete.js';
import { resultWriter, type ResultWriterLimits } from '../../src/callbacks/writer.js';
import { freshDatabase, holdTable } from '../helpers/database.js';
import { callbacksOf, customer, insertRequest, requestById, resultBody, startedPlus } from './fixtures.js';

// The group commit behind the callback route, driven directly so that batches can be arranged:
// with one batch in flight, the first result is written alone and everything recorded meanwhile
// shares the next statement.

const shared = await freshDatabase(t);
const db = shared.db;
const ONE_AT_A_TIME: ResultWriterLimits = { inFlight: 1, batchSize: 64, batchBytes: 1024 * 1024 };

function valid(customerUuid: string, overrides: { started?: string; limit?: number } = {}): ValidResult {
  const body = resultBody(customerUuid, overrides);
  const raw = Buffer.from(JSON.stringify(body));
  return {
    receivedAt: new Date('2026-11-22T04:00:00.000Z'),
    peer: '127.0.0.1',
    rawBody: raw,
    customerUuid,
    started: body.started,
    finished: body.finished,
    body: JSON.stringify(body),
    decision: body.response.limit > 0 ? 'approved' : 'declined',
  };
}

function writerSeeingBatches(limits: ResultWriterLimits = ONE_AT_A_TIME) {
  const batches: number[] = [];
  const writer = resultWriter(db, { limits, onBatch: (size) => batches.push(size) });
  return { writer, batches };
}

t.test('results recorded while a batch is written share the next statement, and each completes its own request', async (t) => {
  const { writer, batches } = writerSeeingBatches();
  const customers = Array.from({ length: 20 }, () => customer('group'));
  const requestIds = await Promise.all(customers.map((c) => insertRequest(db, { customerUuid: c, status: 'submitted' })));

  const recorded = await Promise.all(customers.map((c, i) => writer.record(valid(c, { limit: i % 2 === 0 ? 1000 : 0 }))));
  t.same(batches, [1, 19], 'the first alone, the other nineteen in one statement');

  for (const [i, c] of customers.entries()) {
    const [callback, ...others] = await callbacksOf(db, c);
    t.equal(others.length, 0);
    t.match(recorded[i], { disposition: 'matched', callbackId: callback!.id, requestId: requestIds[i], decision: i % 2 === 0 ? 'approved' : 'declined' });
    t.match(await requestById(db, requestIds[i]!), { status: 'completed', result_callback_id: callback!.id, decision: callback!.decision });
  }
});

t.test('one customer is never twice in a batch: a redelivery is a duplicate, a different result is unmatched', async (t) => {
  const { writer, batches } = writerSeeingBatches();
  const [first, other] = [customer('twice'), customer('other')];
  const requestId = await insertRequest(db, { customerUuid: first, status: 'submitted' });
  await insertRequest(db, { customerUuid: other, status: 'submitted' });

  const recorded = await Promise.all([
    writer.record(valid(first)),
    writer.record(valid(first)),
    writer.record(valid(first, { started: startedPlus(5) })),
    writer.record(valid(other)),
  ]);
  t.same(batches, [1, 2, 1], 'the second copy waits for the next batch, the third result for the one after');
  t.same(
    recorded.map((r: Recorded) => r.disposition),
    ['matched', 'duplicate', 'unmatched', 'matched'],
  );
  const stored = await callbacksOf(db, first);
  t.same(
    stored.map((c) => c.outcome),
    ['matched', 'unmatched'],
  );
  t.match(await requestById(db, requestId), { result_callback_id: stored[0]!.id });
});

t.test('a result the database refuses fails alone: the rest of its batch is stored', async (t) => {
  const { writer, batches } = writerSeeingBatches();
  const customers = Array.from({ length: 4 }, () => customer('refused'));
  await Promise.all(customers.map((c) => insertRequest(db, { customerUuid: c, status: 'submitted' })));
  const bad = customer('year-zero');

  const settled = await Promise.allSettled([
    ...customers.map((c) => writer.record(valid(c))),
    writer.record({ ...valid(bad), started: '0000-01-01T00:00:00Z' }),
  ]);
  t.same(batches, [1, 4], 'the refused result shared a batch with three others');
  t.same(
    settled.map((s) => s.status),
    ['fulfilled', 'fulfilled', 'fulfilled', 'fulfilled', 'rejected'],
  );
  t.match((settled[4] as PromiseRejectedResult).reason, { code: /^22/ }, 'the refusal is the data error itself');
  for (const c of customers) t.match(await callbacksOf(db, c), [{ outcome: 'matched' }]);
  t.same(await callbacksOf(db, bad), []);
});

t.test('a batch holds at most batchSize results and, past the first, batchBytes of raw bodies', async (t) => {
  const size = valid(customer('size')).rawBody.length;
  const { writer, batches } = writerSeeingBatches({ inFlight: 1, batchSize: 3, batchBytes: 64 * size });
  await Promise.all(Array.from({ length: 8 }, () => writer.record(valid(customer('count')))));
  t.same(batches, [1, 3, 3, 1], 'three results at most');

  const { writer: bytesBound, batches: byBytes } = writerSeeingBatches({ inFlight: 1, batchSize: 64, batchBytes: 2 * size + 10 });
  await Promise.all(Array.from({ length: 5 }, () => bytesBound.record(valid(customer('bytes')))));
  t.same(byBytes, [1, 2, 2], 'two bodies fit the byte limit, three do not');

  const { writer: oversize, batches: alone } = writerSeeingBatches({ inFlight: 1, batchSize: 64, batchBytes: size - 1 });
  const recorded = await Promise.all(Array.from({ length: 3 }, () => oversize.record(valid(customer('oversize')))));
  t.same(alone, [1, 1, 1], 'a body larger than the limit still goes, alone');
  t.same(recorded.map((r) => r.disposition), ['unmatched', 'unmatched', 'unmatched']);
});

t.test('close resolves once everything queued is written', async (t) => {
  const { writer } = writerSeeingBatches();
  const customers = Array.from({ length: 6 }, () => customer('close'));
  const pending = customers.map((c) => writer.record(valid(c)));
  await writer.close();
  for (const c of customers) t.equal((await callbacksOf(db, c)).length, 1, `${c} is stored before close resolves`);
  t.same((await Promise.all(pending)).map((r) => r.disposition), Array(6).fill('unmatched'));
  await writer.close();
  t.pass('closing an idle writer resolves at once');
});

t.test('every close waits, however many ask', async (t) => {
  const { writer } = writerSeeingBatches();
  const c = customer('closers');
  const pending = writer.record(valid(c));
  const closed: number[] = [];
  await Promise.all([writer.close().then(() => closed.push(1)), writer.close().then(() => closed.push(2))]);
  t.same(closed.sort(), [1, 2]);
  t.match(await pending, { disposition: 'unmatched' });
});

t.test('a flood of one customer is written one per batch, in arrival order, and nothing is lost', async (t) => {
  const { writer, batches } = writerSeeingBatches();
  const flooded = customer('flood');
  const others = Array.from({ length: 3 }, () => customer('beside'));
  const results = [
    ...Array.from({ length: 5 }, (_, i) => valid(flooded, { started: startedPlus(i) })),
    ...others.map((c) => valid(c)),
  ];
  const recorded = await Promise.all(results.map((r) => writer.record(r)));
  t.same(batches, [1, 4, 1, 1, 1], "the others ride with the flooded customer's second result");
  t.equal(recorded.filter((r) => r.disposition === 'unmatched').length, 8);
  const stored = await callbacksOf(db, flooded);
  t.same(
    stored.map((c) => c.started!.toISOString()),
    results.slice(0, 5).map((r) => r.started),
    'in the order they arrived',
  );
});

t.test("a customer's results are written in arrival order, even past the byte limit or with two writes in flight", async (t) => {
  const size = valid(customer('size')).rawBody.length;
  const { writer, batches } = writerSeeingBatches({ inFlight: 1, batchSize: 64, batchBytes: 3 * size });
  const [first, other, x] = [customer('first'), customer('other'), customer('bigsmall')];
  const big = { ...valid(x, { started: startedPlus(1) }), rawBody: Buffer.alloc(4 * size, 'x') };
  const small = valid(x, { started: startedPlus(2) });
  await Promise.all([writer.record(valid(first)), writer.record(valid(other)), writer.record(big), writer.record(small)]);
  t.same(batches, [1, 1, 1, 1], 'the small result waits for the big one passed over for size');
  t.same(
    (await callbacksOf(db, x)).map((c) => c.started!.toISOString()),
    [big.started, small.started],
  );

  const two = writerSeeingBatches({ inFlight: 2, batchSize: 64, batchBytes: 1024 * 1024 });
  const waiting = customer('inflight');
  const requestId = await insertRequest(db, { customerUuid: waiting, status: 'submitted' });
  const [earlier, later] = await Promise.all([
    two.writer.record(valid(waiting, { started: startedPlus(1) })),
    two.writer.record(valid(waiting, { started: startedPlus(2) })),
  ]);
  t.same(two.batches, [1, 1], 'not two writes at once for one customer');
  t.match(earlier, { disposition: 'matched', requestId }, 'the result that arrived first completes the request');
  t.match(later, { disposition: 'unmatched' });
});

t.test('a result still queued after maxQueuedMs is answered unwritten and never stored later, when the database catches up', async (t) => {
  const { writer } = writerSeeingBatches({ ...ONE_AT_A_TIME, maxQueuedMs: 100 });
  const [sent, queued, behind] = [customer('sent'), customer('queued'), customer('behind')];
  for (const c of [sent, queued, behind]) await insertRequest(db, { customerUuid: c, status: 'submitted' });

  // The database slowed, not failing: a transaction holds the table the results are written to.
  const lock = await holdTable(db, 'callbacks');

  const first = writer.record(valid(sent));
  const late = await Promise.allSettled([writer.record(valid(queued)), writer.record(valid(behind))]);
  t.same(late.map((r) => r.status === 'rejected' && (r.reason as Error).name), ['QueuedTooLongError', 'QueuedTooLongError']);
  await lock.release();
  t.match(await first, { disposition: 'matched' }, 'the result already sent is stored once the lock is gone');
  await writer.close();
  t.same(await callbacksOf(db, queued), [], 'the expired ones are not stored');
  t.same(await callbacksOf(db, behind), []);
  t.match(await writer.record(valid(queued)), { disposition: 'matched' }, "the provider's retry is");
});
