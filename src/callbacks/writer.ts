import type { Kysely } from 'kysely';
import { groupCommit, type GroupCommitLimits } from '../db/group-commit.js';
import { CALLBACK_QUERY_TIMEOUT_MS } from '../db/handle.js';
import type { Tables } from '../db/types.js';
import { type RecordOptions, type Recorded, recordResults, type ValidResult } from '../requests/complete.js';

export interface ResultWriter {
  /** Resolves once the result is committed (or found a duplicate); rejects when it was not stored. */
  record(result: ValidResult): Promise<Recorded>;
  /** Resolves when everything queued has been written. */
  close(): Promise<void>;
}

/** Raw bytes per batch (batchBytes): a single larger result still goes, alone. */
export type ResultWriterLimits = GroupCommitLimits;

/**
 * A result not sent to the database within its statement's timeout of arriving is answered 503
 * (the provider retries) instead of waiting on: once sent, a connection's checkout (3 s) and the
 * statement's timeouts (5 s each for BEGIN, the statement and COMMIT) bound it, well under a minute.
 * Written again alone after a refused result of its batch, it is sent up to 30 s after arriving.
 */
export const RESULT_WRITER_LIMITS: ResultWriterLimits = {
  inFlight: 2,
  batchSize: 64,
  batchBytes: 1024 * 1024,
  maxQueuedMs: CALLBACK_QUERY_TIMEOUT_MS,
  maxRewrittenMs: 6 * CALLBACK_QUERY_TIMEOUT_MS,
};

export interface ResultWriterOptions {
  limits?: ResultWriterLimits;
  /** Told the size of every batch written. */
  onBatch?: (size: number) => void;
  /** Correlation skew and this instance's pushing; default: the contract's 300 s and no push. */
  recording?: RecordOptions;
}

const DEFAULT_RECORDING: RecordOptions = { skewS: 300 };

/**
 * Group commit for callbacks (db/group-commit.ts): one statement and one commit store a batch of
 * results, at most one per customer, each customer's results written in the order they arrived.
 */
export function resultWriter(db: Kysely<Tables>, options: ResultWriterOptions = {}): ResultWriter {
  const recording = options.recording ?? DEFAULT_RECORDING;
  const writer = groupCommit((batch: readonly ValidResult[]) => recordResults(db, batch, recording), {
    limits: options.limits ?? RESULT_WRITER_LIMITS,
    keyOf: (result) => result.customerUuid,
    sizeOf: (result) => result.rawBody.length,
    ...(options.onBatch ? { onBatch: options.onBatch } : {}),
  });
  return { record: (result) => writer.add(result), close: () => writer.close() };
}
