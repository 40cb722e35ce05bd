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

/**
 * One JSON file, rewritten whole (write, then rename). Changes made while a write runs go out
 * together in the next one (a group commit): each add or remove resolves once a write that began
 * after it has finished, so what it did survives a restart, while a sandbox taking hundreds of
 * calls a second writes the file a few times a second instead of twice per call (it spent 0.4 of
 * a core on them at 150 calls/s in the campaign bench, and every call waited for its turn).
 */
export function filePendingStore(file: string, observe: { written?: () => void } = {}): PendingStore {
  let pending: Promise<Map<string, PendingDelivery>> | undefined;
  /** The write in progress, and the one that will follow it with every change made meanwhile. */
  let writing: Promise<void> | undefined;
  let following: Promise<void> | undefined;

  async function read(): Promise<Map<string, PendingDelivery>> {
    let stored: PendingDelivery[] = [];
    try {
      stored = JSON.parse(await readFile(file, 'utf8')) as PendingDelivery[];
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new Error(`cannot read the sandbox's pending deliveries in ${file}: ${(err as Error).message}`);
    }
    return new Map(stored.map((d) => [d.id, d]));
  }

  const load = (): Promise<Map<string, PendingDelivery>> => {
    pending ??= read().catch((err: unknown) => {
      pending = undefined;
      throw err;
    });
    return pending;
  };

  async function save(map: Map<string, PendingDelivery>): Promise<void> {
    // One level only: a recursive mkdir can hang on odd paths (/proc/...); a missing parent is an error.
    await mkdir(path.dirname(file)).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
    });
    const temporary = `${file}.${process.pid}.tmp`;
    await writeFile(temporary, JSON.stringify([...map.values()]));
    await rename(temporary, file);
    observe.written?.();
  }

  /** Resolves once a write that began after this call has finished (one at a time; the next takes every change since). */
  function persist(map: Map<string, PendingDelivery>): Promise<void> {
    if (following) return following;
    const start = (): Promise<void> => {
      const run = save(map);
      // The tracker never rejects: a failed write is its callers' error, not an unhandled one.
      const done = () => {
        writing = undefined;
      };
      writing = run.then(done, done);
      return run;
    };
    if (!writing) return start();
    following = writing.then(() => {
      following = undefined;
      return start();
    });
    return following;
  }

  return {
    add: async (delivery) => {
      const map = await load();
      const stored = { id: randomUUID(), ...delivery };
      map.set(stored.id, stored);
      await persist(map);
      return stored;
    },
    remove: async (id) => {
      const map = await load();
      if (map.delete(id)) await persist(map);
    },
    list: async () => [...(await load()).values()],
  };
}
