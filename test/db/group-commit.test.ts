import t from 'tap';
import { groupCommit } from '../../src/db/group-commit.js';
import { isStorageUnavailable, markDatabaseError } from '../../src/db/storage-errors.js';

// The group-commit writer alone (src/db/group-commit.ts), over a write function that plays the
// database: what a failed batch becomes.

function databaseError(code: string): Error {
  const err = Object.assign(new Error(`database says ${code}`), { code });
  markDatabaseError(err);
  return err;
}

/** A writer whose batches of more than one fail with `err`; alone, each item is written. */
function failingBatches(err: Error) {
  const writes: number[][] = [];
  const writer = groupCommit(
    async (batch: readonly number[]) => {
      writes.push([...batch]);
      if (batch.length > 1) throw err;
      return batch.map((n) => n * 10);
    },
    { limits: { inFlight: 1, batchSize: 64 } },
  );
  return { writer, writes };
}

for (const code of ['40P01', '40001']) {
  t.test(`a batch that lost a race (${code}) is written again item by item`, async (t) => {
    const { writer, writes } = failingBatches(databaseError(code));
    const results = await Promise.all([1, 2, 3, 4].map((n) => writer.add(n)));
    t.same(results, [10, 20, 30, 40], 'every item written');
    t.same(writes, [[1], [2, 3, 4], [2], [3], [4]], 'the first alone, the batch of three again one by one');
  });
}

t.test('a batch that finds the database out of reach fails whole, at once', async (t) => {
  const { writer, writes } = failingBatches(databaseError('57P01'));
  const results = await Promise.allSettled([1, 2, 3].map((n) => writer.add(n)));
  t.same(results.map((r) => r.status), ['fulfilled', 'rejected', 'rejected']);
  t.same(writes, [[1], [2, 3]], 'not written again');
});

t.test('a batch one item of which is refused is written again item by item, and only that item fails', async (t) => {
  const writes: number[][] = [];
  const writer = groupCommit(
    async (batch: readonly number[]) => {
      writes.push([...batch]);
      if (batch.includes(3)) throw databaseError('23514');
      return batch.map((n) => n * 10);
    },
    { limits: { inFlight: 1, batchSize: 64 } },
  );
  const results = await Promise.allSettled([1, 2, 3, 4].map((n) => writer.add(n)));
  t.same(results.map((r) => r.status), ['fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
  await writer.close();
});

/** A promise and what settles it: the test plays a database that answers when told. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

t.test('an item still queued after maxQueuedMs fails unwritten, and the writer goes on', async (t) => {
  const writes: number[][] = [];
  const first = gate();
  const writer = groupCommit(
    async (batch: readonly number[]) => {
      writes.push([...batch]);
      if (batch.includes(1)) await first.opened;
      return batch.map((n) => n * 10);
    },
    { limits: { inFlight: 1, batchSize: 64, maxQueuedMs: 50 } },
  );
  const one = writer.add(1);
  const queued = Promise.allSettled([writer.add(2), writer.add(3)]);
  const [two, three] = await queued;
  t.match(two, { status: 'rejected', reason: { name: 'QueuedTooLongError', message: /not keeping up: not written after \d+ ms in the queue, nothing stored/ } });
  t.match(three, { status: 'rejected', reason: { name: 'QueuedTooLongError' } });
  t.ok(isStorageUnavailable((two as PromiseRejectedResult).reason), 'a 503, as for a database out of reach');
  first.open();
  t.equal(await one, 10, 'the item already sent is written');
  t.equal(await writer.add(4), 40, 'a later item is written at once');
  await writer.close();
  t.same(writes, [[1], [4]], 'the expired items never reached the database');
});

/**
 * Writes items with maxQueuedMs 50 and one batch in flight: the first goes alone, the rest share the
 * next batch, which fails with `code` only once one more item queued behind them has expired. Items
 * written alone fail with their code in `alone`. Answers each item's value, error code or error name.
 */
async function batchFailingLate(code: string, items: readonly number[], batchSize: number, alone: Record<number, string> = {}) {
  const writes: number[][] = [];
  let behind: Promise<unknown> | undefined;
  const writer = groupCommit(
    async (batch: readonly number[]) => {
      writes.push([...batch]);
      if (batch.length > 1) {
        await behind!.catch(() => {});
        throw databaseError(code);
      }
      const refused = alone[batch[0]!];
      if (refused !== undefined) throw databaseError(refused);
      return batch.map((n) => n * 10);
    },
    { limits: { inFlight: 1, batchSize, maxQueuedMs: 50 } },
  );
  const added = items.map((n) => writer.add(n));
  behind = writer.add(items.length + 1);
  const settled = await Promise.allSettled([...added, behind]);
  await writer.close();
  const results = settled.map((r) => (r.status === 'rejected' ? ((r.reason as { code?: string }).code ?? (r.reason as Error).name) : r.value));
  return { writes, results };
}

t.test('a batch that failed after maxQueuedMs is not written again item by item: its items fail unwritten', async (t) => {
  // Lost a race: by the time it fails, the item queued behind it has expired.
  const { writes, results } = await batchFailingLate('40P01', [1, 2, 3], 2);
  t.same(results, [10, 'QueuedTooLongError', 'QueuedTooLongError', 'QueuedTooLongError']);
  t.same(writes, [[1], [2, 3]], 'nothing sent again');
});

t.test('a key passed over behind a busy one expires too, its items in the order they came', async (t) => {
  const first = gate();
  const writes: string[][] = [];
  const writer = groupCommit(
    async (batch: readonly string[]) => {
      writes.push([...batch]);
      if (batch.includes('a1')) await first.opened;
      return batch.map(() => true);
    },
    { limits: { inFlight: 2, batchSize: 64, maxQueuedMs: 50 }, keyOf: (item) => item[0]! },
  );
  const settled: string[] = [];
  const a1 = writer.add('a1');
  const later = ['a2', 'a3'].map((item) => writer.add(item).catch((err: Error) => void settled.push(`${item} ${err.name}`)));
  const b1 = writer.add('b1');
  t.equal(await b1, true, 'another key is written meanwhile');
  await Promise.all(later);
  t.same(settled, ['a2 QueuedTooLongError', 'a3 QueuedTooLongError'], 'the ones waiting for their key expire, oldest first');
  first.open();
  t.equal(await a1, true);
  await writer.close();
  t.same(writes.flat().sort(), ['a1', 'b1']);
});

t.test("once a key's flood expires, what it held out of the scan goes at once", async (t) => {
  const first = gate();
  const writes: string[][] = [];
  const writer = groupCommit(
    async (batch: readonly string[]) => {
      writes.push([...batch]);
      if (batch.includes('a0')) await first.opened;
      return batch.map(() => true);
    },
    { limits: { inFlight: 2, batchSize: 64, maxQueuedMs: 100 }, keyOf: (item) => item[0]! },
  );
  const a0 = writer.add('a0');
  // More of one key than a batch looks at: each is passed over (its key is being written).
  const flood = Array.from({ length: 1000 }, (_, i) => writer.add(`a${i + 1}`).then(() => 'written', (err: Error) => err.name));
  // Arrives later than the flood (so expires later), beyond what a batch looks at.
  await new Promise((resolve) => setTimeout(resolve, 30));
  const b1 = writer.add('b1');
  t.equal(await b1, true, 'written once the flood ahead of it expired, not left to expire itself');
  t.same(new Set(await Promise.all(flood)), new Set(['QueuedTooLongError']));
  first.open();
  await a0;
  await writer.close();
  t.same(writes, [['a0'], ['b1']]);
});

t.test('a batch with a refused item is written again item by item past maxQueuedMs, until the database is found out of reach', async (t) => {
  const alone = { 3: '22008', 5: '57014' };
  const { writes, results } = await batchFailingLate('22008', [1, 2, 3, 4, 5, 6, 7], 6, alone);
  t.same(
    results,
    [10, 20, '22008', 40, '57014', '57014', '57014', 'QueuedTooLongError'],
    'the refused one hears why, the good ones are written, and after a timeout the rest fail unsent',
  );
  t.same(writes, [[1], [2, 3, 4, 5, 6, 7], [2], [3], [4], [5]]);
});

t.test('a batch with a refused item is written again item by item only up to maxRewrittenMs: later items fail unwritten', async (t) => {
  // A database that answers each item alone slowly (60 ms), never timing out: without the limit the
  // last of six would be sent 300 ms after it came, and committed with that stamp.
  const first = gate();
  const writes: number[][] = [];
  const writer = groupCommit(
    async (batch: readonly number[]) => {
      writes.push([...batch]);
      if (batch[0] === 0) {
        await first.opened;
        return [0];
      }
      if (batch.length > 1) throw databaseError('22008');
      await new Promise((resolve) => setTimeout(resolve, 60));
      if (batch[0] === 1) throw databaseError('22008');
      return batch.map((n) => n * 10);
    },
    { limits: { inFlight: 1, batchSize: 6, maxQueuedMs: 10_000, maxRewrittenMs: 150 } },
  );
  // Item 0 holds the one write in flight while the six queue behind it, to go as one batch.
  const zero = writer.add(0);
  const all = Promise.allSettled([1, 2, 3, 4, 5, 6].map((n) => writer.add(n)));
  first.open();
  await zero;
  const settled = await all;
  await writer.close();
  t.same(writes.slice(0, 2), [[0], [1, 2, 3, 4, 5, 6]], 'the six went as one batch');
  const results = settled.map((r) => (r.status === 'rejected' ? ((r.reason as { code?: string }).code ?? (r.reason as Error).name) : r.value));
  t.equal(results[0], '22008', 'the refused one, sent first, hears why');
  const firstExpired = results.indexOf('QueuedTooLongError');
  t.ok(firstExpired > 0 && firstExpired <= 3, `items sent alone until the limit, then none (results ${JSON.stringify(results)})`);
  t.same(results.slice(firstExpired), Array(6 - firstExpired).fill('QueuedTooLongError'), 'every later one fails unwritten');
  t.same(writes.slice(2).flat(), [1, 2, 3, 4, 5, 6].slice(0, firstExpired), 'none of them was sent');
});

t.test('no timer is left behind once the queue is empty', async (t) => {
  const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
  const before = timers();
  const first = gate();
  const writer = groupCommit(
    async (batch: readonly number[]) => {
      if (batch.includes(1)) await first.opened;
      return batch.map((n) => n);
    },
    { limits: { inFlight: 1, batchSize: 64, maxQueuedMs: 60_000 } },
  );
  const written = [writer.add(1), writer.add(2)];
  t.equal(timers(), before + 1, 'armed while an item is queued');
  first.open();
  await Promise.all(written);
  await writer.close();
  t.equal(timers(), before, 'cleared once nothing is queued');
});
