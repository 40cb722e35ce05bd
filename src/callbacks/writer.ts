import type { Kysely } from 'kysely';
import { isStorageUnavailable } from '../db/storage-errors.js';
import type { Tables } from '../db/types.js';
import { type RecordOptions, type Recorded, recordResults, type ValidResult } from '../requests/complete.js';

export interface ResultWriter {
  /** Resolves once the result is committed (or found a duplicate); rejects when it was not stored. */
  record(result: ValidResult): Promise<Recorded>;
  /** Resolves when everything queued has been written. */
  close(): Promise<void>;
}

export interface ResultWriterLimits {
  /** Batches being written at once; the rest of the pool stays free for other routes. */
  inFlight: number;
  /** Results per batch, at most. */
  batchSize: number;
  /** Raw bytes per batch, at most (a single larger result still goes, alone). */
  batchBytes: number;
}

export const RESULT_WRITER_LIMITS: ResultWriterLimits = { inFlight: 2, batchSize: 64, batchBytes: 1024 * 1024 };

export interface ResultWriterOptions {
  limits?: ResultWriterLimits;
  /** Told the size of every batch written. */
  onBatch?: (size: number) => void;
  /** Correlation skew and this instance's pushing; default: the contract's 300 s and no push. */
  recording?: RecordOptions;
}

const DEFAULT_RECORDING: RecordOptions = { skewS: 300 };

/** Queued results looked at per batch, at most. */
const SCAN_LIMIT = 1000;

interface Pending {
  result: ValidResult;
  resolve(recorded: Recorded): void;
  reject(err: unknown): void;
}

/**
 * Group commit for callbacks: results that arrive while a batch is being written wait for the next
 * one, so under load one statement and one commit (one WAL flush) store many of them, and a few
 * database backends do the work of one per connection. Nothing waits on a timer: an idle writer
 * starts a batch in the same turn of the event loop. Each caller still hears only once its own
 * result is committed.
 */
export function resultWriter(db: Kysely<Tables>, options: ResultWriterOptions = {}): ResultWriter {
  const limits = options.limits ?? RESULT_WRITER_LIMITS;
  const recording = options.recording ?? DEFAULT_RECORDING;
  const queue: Pending[] = [];
  let writing = 0;
  const idle: Array<() => void> = [];

  /** Customers with a result being written now: their next one waits for that write to end. */
  const busy = new Set<string>();

  /**
   * The next batch: the oldest results, one per customer, none of a customer being written; once
   * a customer's result is passed over, its later ones are too, so each customer's results are
   * written in the order they arrived.
   */
  function take(): Pending[] {
    const batch: Pending[] = [];
    const passed = new Set<string>(busy);
    let bytes = 0;
    // Bounded, so that a flood of one customer's copies never makes each batch scan them all.
    for (let i = 0, seen = 0; i < queue.length && seen < SCAN_LIMIT && batch.length < limits.batchSize; seen++) {
      const pending = queue[i]!;
      const customer = pending.result.customerUuid;
      const size = pending.result.rawBody.length;
      if (passed.has(customer) || (batch.length > 0 && bytes + size > limits.batchBytes)) {
        passed.add(customer);
        i++;
        continue;
      }
      queue.splice(i, 1);
      batch.push(pending);
      passed.add(customer);
      bytes += size;
    }
    return batch;
  }

  function pump(): void {
    while (writing < limits.inFlight) {
      const batch = take();
      if (batch.length === 0) return;
      writing++;
      for (const p of batch) busy.add(p.result.customerUuid);
      void write(batch).finally(() => {
        for (const p of batch) busy.delete(p.result.customerUuid);
        writing--;
        pump();
        if (writing === 0 && queue.length === 0) for (const resolve of idle.splice(0)) resolve();
      });
    }
  }

  async function write(batch: Pending[]): Promise<void> {
    try {
      options.onBatch?.(batch.length);
      const recorded = await recordResults(db, batch.map((p) => p.result), recording);
      batch.forEach((p, i) => p.resolve(recorded[i]!));
    } catch (err) {
      if (batch.length === 1 || isStorageUnavailable(err)) {
        for (const p of batch) p.reject(err);
        return;
      }
      // One result the database refuses (or a deadlock with another instance) fails the whole
      // statement and stores nothing: write each alone, so only what is really refused fails.
      // One after another, within this write's slot, so that the pool stays free for the rest.
      for (const p of batch) {
        try {
          p.resolve((await recordResults(db, [p.result], recording))[0]!);
        } catch (alone) {
          p.reject(alone);
        }
      }
    }
  }

  return {
    record(result) {
      return new Promise<Recorded>((resolve, reject) => {
        queue.push({ result, resolve, reject });
        pump();
      });
    },
    close() {
      if (writing === 0 && queue.length === 0) return Promise.resolve();
      return new Promise<void>((resolve) => idle.push(resolve));
    },
  };
}
