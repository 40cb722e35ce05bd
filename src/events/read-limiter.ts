/** Which of a request's reads: its first, which a client is waiting on now, or a waiting long-poll's read again after a wake. */
export type ReadKind = 'first' | 'again';

export interface ReadOptions {
  /** Default 'first'. Reads again wait behind first reads, up to FIRST_READS_AHEAD of them in a row. */
  kind?: ReadKind;
  /** Aborted while the read is queued: it leaves the queue, never runs, and rejects with the signal's reason. */
  signal?: AbortSignal | undefined;
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
  /** Hands the entry its slot: it stops listening for an abort and starts after the event loop's turn. */
  start(): void;
}

/**
 * Runs at most `max` reads at once; the others queue, first reads ahead of reads again (see
 * FIRST_READS_AHEAD), each kind in the order it came. onQueue follows the queues' lengths.
 */
export function readLimiter(max: number, onQueue?: (kind: ReadKind, delta: 1 | -1) => void): ReadLimiter {
  let running = 0;
  // Sets keep insertion order and drop an abandoned entry at once, wherever it stands.
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

  const acquire = (kind: ReadKind, signal: AbortSignal | undefined): Promise<void> => {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (running < max) {
      running += 1;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const abort = () => {
        dequeue(entry);
        reject(signal!.reason);
      };
      const entry: Queued = {
        kind,
        start() {
          signal?.removeEventListener('abort', abort);
          // After the event loop's turn: PGlite runs a query on this thread, and reads handed on at
          // once, promise to promise, kept every request's I/O waiting until the whole queue was read.
          setImmediate(resolve);
        },
      };
      queues[kind].add(entry);
      onQueue?.(kind, 1);
      signal?.addEventListener('abort', abort, { once: true });
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
      await acquire(options.kind ?? 'first', options.signal);
      try {
        // Abandoned between being handed its slot and starting: the slot passes on unused.
        options.signal?.throwIfAborted();
        return await read();
      } finally {
        release();
      }
    },
    counts: () => ({ running, queued: { first: queues.first.size, again: queues.again.size } }),
  };
}
