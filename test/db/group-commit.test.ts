import t from 'tap';
import { groupCommit } from '../../src/db/group-commit.js';
import { markDatabaseError } from '../../src/db/storage-errors.js';

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
