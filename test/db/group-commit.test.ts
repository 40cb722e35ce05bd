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

t.test('a batch that failed after maxQueuedMs is not written again item by item: its items fail unwritten', async (t) => {
  const writes: number[][] = [];
  let behind: Promise<unknown> | undefined;
  const writer = groupCommit(
    async (batch: readonly number[]) => {
      writes.push([...batch]);
      // Slow, then lost a race: by the time it fails, the item queued behind it has expired.
      if (batch.length > 1) {
        await behind!.catch(() => {});
        throw databaseError('40P01');
      }
      return batch.map((n) => n * 10);
    },
    { limits: { inFlight: 1, batchSize: 2, maxQueuedMs: 50 } },
  );
  // 1 goes alone; 2 and 3 wait for it and share the next batch; 4 waits behind them.
  const batch = [writer.add(1), writer.add(2), writer.add(3)];
  behind = writer.add(4);
  const results = await Promise.allSettled([...batch, behind]);
  t.same(
    results.map((r) => (r.status === 'rejected' ? (r.reason as Error).name : r.value)),
    [10, 'QueuedTooLongError', 'QueuedTooLongError', 'QueuedTooLongError'],
  );
  t.same(writes, [[1], [2, 3]], 'nothing sent again');
  await writer.close();
});

t.test('a key passed over behind a busy one expires too, in order', async (t) => {
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
  const a1 = writer.add('a1');
  const a2 = writer.add('a2');
  const b1 = writer.add('b1');
  t.equal(await b1, true, 'another key is written meanwhile');
  await t.rejects(a2, { name: 'QueuedTooLongError' }, 'the one waiting for its key expires');
  first.open();
  t.equal(await a1, true);
  await writer.close();
  t.same(writes.flat().sort(), ['a1', 'b1']);
});
