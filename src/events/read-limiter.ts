/** Which of a request's reads: its first, which a client is waiting on now, or a waiting long-poll's read again after a wake. */
export type ReadKind = 'first' | 'again';

export interface ReadOptions {
  /** Default 'first'. Reads again wait behind first reads, up to FIRST_READS_AHEAD of them in a row. */
  kind?: ReadKind;
}

export interface ReadLimiter {
  run<T>(read: () => Promise<T>, options?: ReadOptions): Promise<T>;
  /** Reads holding a slot (running, or handed one and about to start) and reads queued, of each kind. */
  counts(): { running: number; queued: Record<ReadKind, number> };
}

/**
 * While reads again wait, at most this many first reads are served in a row before one of them: a
 * page a client asked for goes ahead of the many re-reads every commit wakes, and a re-read is still
 * served however many pages come.
 */
export const FIRST_READS_AHEAD = 4;

interface Queued {
  kind: ReadKind;
  /** Hands the entry its slot: it starts after the event loop's turn. */
  start(): void;
}

/**
 * Runs at most `max` reads at once; the others queue, first reads ahead of reads again (see
 * FIRST_READS_AHEAD), each kind in the order it came. onQueue follows the queues' lengths.
 */
export function readLimiter(max: number, onQueue?: (kind: ReadKind, delta: 1 | -1) => void): ReadLimiter {
  let running = 0;
  const queues: Record<ReadKind, Set<Queued>> = { first: new Set(), again: new Set() };
  let firstsInARow = 0;

  const dequeue = (entry: Queued) => {
    queues[entry.kind].delete(entry);
    onQueue?.(entry.kind, -1);
  };

  const next = (): Queued | undefined => {
    const waitingAgain = queues.again.size > 0;
    const kind: ReadKind = waitingAgain && (queues.first.size === 0 || firstsInARow >= FIRST_READS_AHEAD) ? 'again' : 'first';
    const [entry] = queues[kind];
    if (!entry) return undefined;
    firstsInARow = kind === 'first' && waitingAgain ? firstsInARow + 1 : 0;
    dequeue(entry);
    return entry;
  };

  const acquire = (kind: ReadKind): Promise<void> => {
    if (running < max) {
      running += 1;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      const entry: Queued = {
        kind,
        start() {
          // After the event loop's turn: PGlite runs a query on this thread, and reads handed on at
          // once, promise to promise, kept every request's I/O waiting until the whole queue was read.
          setImmediate(resolve);
        },
      };
      queues[kind].add(entry);
      onQueue?.(kind, 1);
    });
  };

  // A slot freed by a finished read passes to the next queued one (running stays).
  const release = () => {
    const entry = next();
    if (entry) entry.start();
    else running -= 1;
  };

  return {
    async run(read, options = {}) {
      await acquire(options.kind ?? 'first');
      try {
        return await read();
      } finally {
        release();
      }
    },
    counts: () => ({ running, queued: { first: queues.first.size, again: queues.again.size } }),
  };
}
