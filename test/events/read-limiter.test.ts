import t from 'tap';
import { FIRST_READS_AHEAD, type ReadKind, readLimiter } from '../../src/events/read-limiter.js';

// The event feed's bound on reads at once, alone: which queued read gets a freed slot, and what an
// abandoned one leaves behind. Reads here are promises the test settles, so that a slot is held
// exactly as long as the test says; test/events/feed.test.ts shows the same through the app.

/** A read the test ends when it chooses; `started` says whether the limiter ran it. */
function heldRead(name: string, log: string[]) {
  let finish!: () => void;
  const ended = new Promise<string>((resolve) => (finish = () => resolve(name)));
  const held = { started: false, finish, read: () => ((held.started = true), log.push(name), ended) };
  return held;
}

/** Two reads holding both slots of a limiter of two, and the names of the reads as they start. */
function fullLimiter() {
  const log: string[] = [];
  const queued: Record<ReadKind, number> = { first: 0, again: 0 };
  const limiter = readLimiter(2, (kind, delta) => (queued[kind] += delta));
  const holders = [heldRead('held-0', log), heldRead('held-1', log)];
  const running = holders.map((h) => limiter.run(h.read));
  return { limiter, log, queued, holders, running };
}

/** A read that ends as soon as it starts, recording its name. */
const quick = (name: string, log: string[]) => async () => {
  log.push(name);
  return name;
};

t.test("a request's first read is served before the reads again that queued earlier", async (t) => {
  const { limiter, log, queued, holders, running } = fullLimiter();
  const again = Array.from({ length: 6 }, (_, i) => limiter.run(quick(`again-${i}`, log), { kind: 'again' }));
  const first = limiter.run(quick('first', log));
  t.same(queued, { first: 1, again: 6 }, 'all queued behind the two held reads');
  t.same(limiter.counts(), { running: 2, queued: { first: 1, again: 6 } });

  holders[0]!.finish();
  t.equal(await first, 'first');
  t.same(log, ['held-0', 'held-1', 'first'], 'the first read took the first freed slot');
  holders[1]!.finish();
  await Promise.all([...running, ...again]);
  t.same(log.slice(3), ['again-0', 'again-1', 'again-2', 'again-3', 'again-4', 'again-5'], 'then every read again, in the order they came');
  t.same(limiter.counts(), { running: 0, queued: { first: 0, again: 0 } });
  t.same(queued, { first: 0, again: 0 });
});

t.test('a read again is still served while first reads keep coming: one after at most FIRST_READS_AHEAD in a row', async (t) => {
  const { limiter, log, holders, running } = fullLimiter();
  const again = [limiter.run(quick('again-0', log), { kind: 'again' }), limiter.run(quick('again-1', log), { kind: 'again' })];
  const firsts = Array.from({ length: 3 * FIRST_READS_AHEAD }, (_, i) => limiter.run(quick(`first-${i}`, log)));
  holders[0]!.finish();
  await Promise.all([running[0], ...firsts, ...again]);
  const order = log.slice(2);
  t.equal(order.indexOf('again-0'), FIRST_READS_AHEAD, `${FIRST_READS_AHEAD} first reads, then a read again: ${order.join(' ')}`);
  t.equal(order.indexOf('again-1'), 2 * FIRST_READS_AHEAD + 1, 'and again after as many more');
  t.equal(order.length, 3 * FIRST_READS_AHEAD + 2, 'every read ran');
  holders[1]!.finish();
  await running[1];
  t.same(limiter.counts(), { running: 0, queued: { first: 0, again: 0 } });
});

t.test('a queued read whose signal aborts leaves the queue, never runs, and leaks no slot', async (t) => {
  const { limiter, log, queued, holders, running } = fullLimiter();
  const gone = new AbortController();
  const reads = ['again-0', 'again-1', 'again-2'].map((name) => heldRead(name, log));
  const results = reads.map((r, i) => limiter.run(r.read, { kind: 'again', signal: i === 1 ? gone.signal : undefined }));
  const abandoned = results[1]!.then(
    () => 'ran',
    (err: unknown) => (err === gone.signal.reason ? 'rejected with the signal\'s reason' : `rejected: ${String(err)}`),
  );
  t.same(queued, { first: 0, again: 3 });

  gone.abort();
  t.equal(await abandoned, "rejected with the signal's reason");
  t.same(limiter.counts(), { running: 2, queued: { first: 0, again: 2 } }, 'out of the queue at once, while both slots are still held');
  t.same(queued, { first: 0, again: 2 }, 'and the gauge follows');

  for (const h of holders) h.finish();
  for (const r of [reads[0]!, reads[2]!]) {
    // Each starts once a slot is free (after the event loop's turn); the test ends it then.
    while (!r.started) await new Promise((resolve) => setImmediate(resolve));
    r.finish();
  }
  await Promise.all([...running, results[0], results[2]]);
  t.notOk(reads[1]!.started, 'the abandoned read never ran');
  t.same(log, ['held-0', 'held-1', 'again-0', 'again-2'], 'the others all ran');
  t.same(limiter.counts(), { running: 0, queued: { first: 0, again: 0 } }, 'no slot taken by the abandoned read');

  const later = heldRead('later', log);
  const runs = limiter.run(later.read);
  await Promise.resolve();
  t.ok(later.started, 'a later read runs at once, without waiting for a slot');
  later.finish();
  await runs;
  t.same(limiter.counts(), { running: 0, queued: { first: 0, again: 0 } });
});

t.test('a read abandoned after being handed its slot, before it starts, passes the slot on unused', async (t) => {
  const log: string[] = [];
  const limiter = readLimiter(1);
  const holder = heldRead('held', log);
  const running = limiter.run(holder.read);
  const gone = new AbortController();
  const handed = heldRead('handed', log);
  const abandoned = limiter.run(handed.read, { signal: gone.signal }).catch((err: unknown) => err);
  const after = limiter.run(quick('after', log), { kind: 'again' });

  holder.finish();
  await running; // the slot is handed to the next read now; it starts after the event loop's turn
  t.same(limiter.counts(), { running: 1, queued: { first: 0, again: 1 } }, 'handed its slot, not yet started');
  gone.abort();
  t.equal(await abandoned, gone.signal.reason, "rejected with the signal's reason");
  t.equal(await after, 'after', 'the read behind it got the slot');
  t.notOk(handed.started, 'the abandoned read never ran');
  t.same(limiter.counts(), { running: 0, queued: { first: 0, again: 0 } });
});

t.test('a read whose signal has already aborted is refused at once, never queued behind the slots held', async (t) => {
  const log: string[] = [];
  const limiter = readLimiter(1);
  const holder = heldRead('held', log);
  const running = limiter.run(holder.read);
  const gone = new AbortController();
  gone.abort();
  const read = heldRead('never', log);
  // While the slot is still held: a refusal that waited for a slot would never come here.
  await t.rejects(limiter.run(read.read, { signal: gone.signal }));
  t.same(limiter.counts(), { running: 1, queued: { first: 0, again: 0 } }, 'nothing queued');
  holder.finish();
  await running;
  t.notOk(read.started);
  t.same(limiter.counts(), { running: 0, queued: { first: 0, again: 0 } });
});
