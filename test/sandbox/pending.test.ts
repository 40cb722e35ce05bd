import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { filePendingStore } from '../../src/sandbox/pending.js';

// The sandbox's file of deliveries it still owes: what an add or a remove did is on disk when it
// resolves, and changes made while the file is being written go out together in the next write.

async function tempFile(t: Test): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'ugw-sandbox-pending-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return path.join(dir, 'data', 'pending.json');
}

const result = (customerUuid: string) => ({
  customerUuid,
  started: '2026-11-26T12:00:00.000Z',
  serviceType: 'CREDIT_CARD_UNDERWRITING',
  response: {},
}) as never;

const onDisk = async (file: string): Promise<string[]> => (JSON.parse(await readFile(file, 'utf8')) as Array<{ id: string }>).map((d) => d.id);

t.test('a hundred adds at once: each on disk when it resolves, in two writes instead of a hundred', async (t) => {
  const file = await tempFile(t);
  let writes = 0;
  const store = filePendingStore(file, { written: () => writes++ });
  const missing: string[] = [];
  await Promise.all(
    Array.from({ length: 100 }, async (_, i) => {
      const stored = await store.add({ dueAt: Date.now() + 60_000, result: result(`c-${i}`) });
      if (!(await onDisk(file)).includes(stored.id)) missing.push(stored.id);
    }),
  );
  t.same(missing, [], 'every add was written before it resolved');
  t.equal(writes, 2, 'the first add alone, then the 99 made while it was written');
  const again = filePendingStore(file);
  t.equal((await again.list()).length, 100, 'a restarted sandbox finds them all');
});

t.test('removes: gone from the file when they resolve; a later add and remove interleave correctly', async (t) => {
  const file = await tempFile(t);
  const store = filePendingStore(file);
  const added = await Promise.all(Array.from({ length: 10 }, (_, i) => store.add({ dueAt: 0, result: result(`r-${i}`) })));
  const kept = await store.add({ dueAt: 0, result: result('kept') });
  await Promise.all(added.map(async (d) => {
    await store.remove(d.id);
    t.notOk((await onDisk(file)).includes(d.id), `${d.result.customerUuid} removed on disk`);
  }));
  t.same(await onDisk(file), [kept.id]);
  t.same((await filePendingStore(file).list()).map((d) => d.id), [kept.id]);
});

t.test('a file that cannot be written: the add rejects (the call is refused), and the next one tries again', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'ugw-sandbox-pending-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  // Its parent's parent does not exist: the store makes one level only.
  const store = filePendingStore(path.join(dir, 'missing', 'data', 'pending.json'));
  const attempts = await Promise.allSettled([1, 2, 3].map((i) => store.add({ dueAt: 0, result: result(`f-${i}`) })));
  t.same(attempts.map((a) => a.status), ['rejected', 'rejected', 'rejected']);
  await t.rejects(store.add({ dueAt: 0, result: result('f-4') }), /ENOENT/);
});
