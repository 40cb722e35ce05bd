import { isStorageUnavailable, StorageUnavailableError } from './storage-errors.js';

/**
 * Group commit: writes that arrive while a batch is being written wait for the next one, so under
 * load one statement and one commit (one WAL flush) store many of them, and a few database backends
 * do the work of one per connection. Nothing waits on a timer: an idle writer starts a batch in the
 * same turn of the event loop. Each caller still hears only once its own write is committed.
 * (The callbacks' results and the submits' two statements are written this way.) Reads that
 * arrive together batch the same way: GET one customer's reads share one statement
 * (queries/service.ts), with nothing to commit.
 */
export interface GroupCommit<T, R> {
  /** Resolves once the item's batch is committed, with what the batch said of it; rejects when it was not written. */
  add(item: T): Promise<R>;
  /** Resolves when everything queued has been written, or has failed. */
  close(): Promise<void>;
}

export interface GroupCommitLimits {
  /** Batches being written at once; the rest of the pool stays free for other routes. */
  inFlight: number;
  /** Items per batch, at most. */
  batchSize: number;
  /** Bytes per batch (sizeOf), at most; a single larger item still goes, alone. */
  batchBytes?: number;
  /**
   * An item not sent to the database this long after it was added (nor sent again alone after its
   * batch lost a race) fails (QueuedTooLongError, a 503 for its request) and is never written: a
   * database slowed, not failing, neither keeps callers waiting without bound nor has rows committed
   * long after the time they were stamped with. Once sent, a connection's checkout and the
   * statement's timeouts bound it. (A batch that holds a refused item is sent again item by item
   * past this age, so that the refused one hears why, each write bounded by its timeouts, until
   * one finds the database out of reach or too slow, or maxRewrittenMs.) Default: no limit.
   */
  maxQueuedMs?: number;
  /**
   * An item of a batch that held a refused item is not sent again alone this long after it was
   * added: it fails unwritten (QueuedTooLongError), like one that waited too long in the queue.
   * Each write alone is bounded by its timeouts, but one after another they are not: a database
   * that answers each just inside its timeout would commit a batch's last item minutes after it
   * was stamped, below the statistics' fold (aggregates/closing.ts, FOLD_AFTER_MS). Default: no limit.
   */
  maxRewrittenMs?: number;
}

/** The database did not keep up: the item was never sent, nothing of it is stored. */
export class QueuedTooLongError extends StorageUnavailableError {
  constructor(queuedMs: number) {
    super(`the database is not keeping up: not written after ${Math.round(queuedMs)} ms in the queue, nothing stored`);
    this.name = 'QueuedTooLongError';
  }
}

export interface GroupCommitOptions<T> {
  limits: GroupCommitLimits;
  /** Items of one key never share a batch nor are written at once; they are written in the order they came. */
  keyOf?: (item: T) => string;
  sizeOf?: (item: T) => number;
  /** Told the size of every batch written. */
  onBatch?: (size: number) => void;
}

/** Queued items looked at per batch, at most. */
const SCAN_LIMIT = 1000;

interface Pending<T, R> {
  item: T;
  /** performance.now() when added. */
  queuedAt: number;
  resolve(result: R): void;
  reject(err: unknown): void;
}

/** A deadlock or a serialization failure: the batch lost a race, and its items alone may not. */
const LOST_A_RACE = new Set(['40P01', '40001']);
const lostARace = (err: unknown) => LOST_A_RACE.has(String((err as { code?: unknown } | null)?.code));

/**
 * True when a batch of `size` items that failed with `err` is written again item by item: all but a
 * batch of one, or one the database is out of reach for (the items alone would fail alike).
 */
export function writtenAgainItemByItem(err: unknown, size: number): boolean {
  return size > 1 && !(isStorageUnavailable(err) && !lostARace(err));
}

/**
 * A group-commit writer over `write`, which stores a batch in one statement and answers each item
 * in the batch's order. A batch the database refuses as a whole (one item it refuses, a deadlock or
 * a serialization failure with another statement) is written again item by item, so that only what
 * is really refused fails; a database out of reach fails the batch at once.
 */
export function groupCommit<T, R>(write: (batch: readonly T[]) => Promise<R[]>, options: GroupCommitOptions<T>): GroupCommit<T, R> {
  const { limits, keyOf, sizeOf } = options;
  const { maxQueuedMs, maxRewrittenMs } = limits;
  const queue: Pending<T, R>[] = [];
  /** Armed while items are queued (maxQueuedMs set): fails the oldest once they pass the limit. */
  let expiry: NodeJS.Timeout | undefined;
  let writing = 0;
  const idle: Array<() => void> = [];
  /** Keys with an item being written now: their next one waits for that write to end. */
  const busy = new Set<string>();

  /**
   * The next batch: the oldest items, one per key, none of a key being written; once a key's item
   * is passed over, its later ones are too, so each key's items are written in the order they came.
   */
  function take(): Pending<T, R>[] {
    const batch: Pending<T, R>[] = [];
    const passed = new Set<string>(busy);
    let bytes = 0;
    expireQueued();
    // Bounded, so that a flood of one key's items never makes each batch scan them all.
    for (let i = 0, seen = 0; i < queue.length && seen < SCAN_LIMIT && batch.length < limits.batchSize; seen++) {
      const pending = queue[i]!;
      const key = keyOf?.(pending.item);
      const size = sizeOf?.(pending.item) ?? 0;
      const tooBig = limits.batchBytes !== undefined && batch.length > 0 && bytes + size > limits.batchBytes;
      if ((key !== undefined && passed.has(key)) || tooBig) {
        if (key !== undefined) passed.add(key);
        i++;
        continue;
      }
      queue.splice(i, 1);
      batch.push(pending);
      if (key !== undefined) passed.add(key);
      bytes += size;
    }
    return batch;
  }

  /** The queue is in the order items came: those past maxQueuedMs are at its head. */
  function expireQueued(): void {
    if (maxQueuedMs === undefined) return;
    const now = performance.now();
    let old = 0;
    while (old < queue.length && now - queue[old]!.queuedAt >= maxQueuedMs) old++;
    if (old > 0) for (const p of queue.splice(0, old)) p.reject(new QueuedTooLongError(now - p.queuedAt));
  }

  /** Armed for the oldest queued item while there is one; never left armed over an empty queue (it would hold the process). */
  function armExpiry(): void {
    if (maxQueuedMs === undefined) return;
    if (queue.length === 0) {
      clearTimeout(expiry);
      expiry = undefined;
      return;
    }
    if (expiry !== undefined) return;
    expiry = setTimeout(() => {
      expiry = undefined;
      expireQueued();
      // What expired may have held back an item that can go now (a key's flood filling SCAN_LIMIT).
      pump();
      settleIdle();
    }, Math.max(0, queue[0]!.queuedAt + maxQueuedMs - performance.now()));
  }

  function settleIdle(): void {
    if (writing === 0 && queue.length === 0) for (const resolve of idle.splice(0)) resolve();
  }

  function pump(): void {
    while (writing < limits.inFlight) {
      const batch = take();
      if (batch.length === 0) break;
      writing++;
      const keys = keyOf ? batch.map((p) => keyOf(p.item)) : [];
      for (const key of keys) busy.add(key);
      void writeBatch(batch).finally(() => {
        for (const key of keys) busy.delete(key);
        writing--;
        pump();
        settleIdle();
      });
    }
    armExpiry();
  }

  async function writeBatch(batch: Pending<T, R>[]): Promise<void> {
    try {
      options.onBatch?.(batch.length);
      const results = await write(batch.map((p) => p.item));
      batch.forEach((p, i) => p.resolve(results[i]!));
    } catch (err) {
      if (!writtenAgainItemByItem(err, batch.length)) {
        for (const p of batch) p.reject(err);
        return;
      }
      // One after another, within this write's slot, so that the pool stays free for the rest. After a
      // lost race, an item past maxQueuedMs is not sent again; after a refused item, each is (the
      // refused one must hear 400, not 503) up to maxRewrittenMs, until one finds the database out of
      // reach or too slow: the rest then fail alike, unsent.
      const raced = lostARace(err);
      let unavailable: unknown;
      for (const p of batch) {
        const queuedMs = performance.now() - p.queuedAt;
        if (unavailable !== undefined) {
          p.reject(unavailable);
          continue;
        }
        const limit = raced ? maxQueuedMs : maxRewrittenMs;
        if (limit !== undefined && queuedMs >= limit) {
          p.reject(new QueuedTooLongError(queuedMs));
          continue;
        }
        try {
          p.resolve((await write([p.item]))[0]!);
        } catch (alone) {
          if (isStorageUnavailable(alone)) unavailable = alone;
          p.reject(alone);
        }
      }
    }
  }

  return {
    add(item) {
      return new Promise<R>((resolve, reject) => {
        queue.push({ item, queuedAt: performance.now(), resolve, reject });
        pump();
      });
    },
    close() {
      if (writing === 0 && queue.length === 0) return Promise.resolve();
      return new Promise<void>((resolve) => idle.push(resolve));
    },
  };
}
