import { randomUUID } from 'node:crypto';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { UnderwritingResult } from '../provider/schemas.js';

/** A result without its finished time, which is stamped at delivery. */
export type PendingResult = Pick<UnderwritingResult, 'customerUuid' | 'started' | 'serviceType' | 'response'>;

/** A result the simulator owes: delivered at dueAt (finished is stamped then), retried until done. */
export interface PendingDelivery {
  id: string;
  dueAt: number;
  result: PendingResult;
}

/**
 * Where the simulator keeps what it still has to deliver. A real provider delivers results it
 * accepted even if we restart it; the file store makes the sandbox do the same.
 */
export interface PendingStore {
  /** Resolves once the delivery would survive a restart. */
  add(delivery: Omit<PendingDelivery, 'id'>): Promise<PendingDelivery>;
  remove(id: string): Promise<void>;
  list(): Promise<PendingDelivery[]>;
}

export function memoryPendingStore(): PendingStore {
  const pending = new Map<string, PendingDelivery>();
  return {
    add: async (delivery) => {
      const stored = { id: randomUUID(), ...delivery };
      pending.set(stored.id, stored);
      return stored;
    },
    remove: async (id) => void pending.delete(id),
    list: async () => [...pending.values()],
  };
}

/** One JSON file, rewritten whole (write, then rename) on every change, one change at a time. */
export function filePendingStore(file: string): PendingStore {
  let pending: Map<string, PendingDelivery> | undefined;
  let queue: Promise<unknown> = Promise.resolve();

  async function load(): Promise<Map<string, PendingDelivery>> {
    if (pending) return pending;
    let stored: PendingDelivery[] = [];
    try {
      stored = JSON.parse(await readFile(file, 'utf8')) as PendingDelivery[];
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new Error(`cannot read the sandbox's pending deliveries in ${file}: ${(err as Error).message}`);
    }
    pending = new Map(stored.map((d) => [d.id, d]));
    return pending;
  }

  async function save(map: Map<string, PendingDelivery>): Promise<void> {
    // One level only: a recursive mkdir can hang on odd paths (/proc/...); a missing parent is an error.
    await mkdir(path.dirname(file)).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
    });
    const temporary = `${file}.${process.pid}.tmp`;
    await writeFile(temporary, JSON.stringify([...map.values()]));
    await rename(temporary, file);
  }

  const serially = <T>(work: () => Promise<T>): Promise<T> => {
    const next = queue.then(work, work);
    queue = next.catch(() => {});
    return next;
  };

  return {
    add: (delivery) =>
      serially(async () => {
        const map = await load();
        const stored = { id: randomUUID(), ...delivery };
        map.set(stored.id, stored);
        await save(map);
        return stored;
      }),
    remove: (id) =>
      serially(async () => {
        const map = await load();
        if (map.delete(id)) await save(map);
      }),
    list: () => serially(async () => [...(await load()).values()]),
  };
}
