import type { Kysely } from 'kysely';
import { groupCommit, type GroupCommitLimits } from '../db/group-commit.js';
import type { Tables } from '../db/types.js';
import { type Acceptance, insertSubmitting, markSubmitted, type NewSubmission, SEND_WINDOW_MS, type StoredSubmission } from '../requests/sql.js';
import { batchSpanParent, type SpanParent } from '../tracing/spans.js';

/**
 * A synchronous submit's two writes, each a group commit (db/group-commit.ts): the submits that
 * arrive while a batch is written share the next statement and its commit, as callbacks do. Under
 * load that is what lets a submit cost the database less than a naive insert and update of its
 * own, although it also takes and gives back a provider slot (docs/performance.md).
 */
export interface SubmitWrites {
  /** Commits the request as `submitting`; null when its customer already has a request in flight. */
  store(submission: NewSubmission, trace: SpanParent | undefined): Promise<StoredSubmission>;
  /** Records the provider's acceptance (and frees its slot); throws when the row vanished or the write failed. */
  accept(acceptance: Acceptance, trace: SpanParent | undefined): Promise<void>;
  /** Resolves when every queued write is done. */
  close(): Promise<void>;
}

/** Each writer's batches in flight and size: a pool of 10 keeps most of its connections for everything else. */
export const SUBMIT_WRITE_LIMITS: Omit<GroupCommitLimits, 'maxQueuedMs' | 'maxRewrittenMs'> = { inFlight: 2, batchSize: 64 };

/**
 * A request not even sent to the database within the send window could not be sent to the
 * provider anyway (submit.ts): it fails unwritten (503, nothing stored or sent) rather than being
 * stored only to be marked failed (as one still is when its insert, sent in time, ends past the
 * window). An acceptance has no such limit: the provider has the request, its record waits
 * however long.
 */
export const STORE_QUEUE_LIMIT_MS = SEND_WINDOW_MS;

/** How long after it came a store is still sent again alone, after another of its batch was refused (GroupCommitLimits.maxRewrittenMs). */
export const STORE_REWRITE_LIMIT_MS = 30_000;

interface Traced<T> {
  value: T;
  trace: SpanParent | undefined;
}

export interface SubmitWritesOptions {
  /** Both writers' batches; the store's age limit is storeQueueLimitMs. */
  limits?: Omit<GroupCommitLimits, 'maxQueuedMs' | 'maxRewrittenMs'>;
  /** A store not sent within this long fails unwritten (default STORE_QUEUE_LIMIT_MS); acceptances wait however long. */
  storeQueueLimitMs?: number;
  /** Told the size of every batch written: which statement, how many submits. */
  onBatch?: (statement: 'insert_submitting' | 'mark_submitted', size: number) => void;
}

export function submitWrites(db: Kysely<Tables>, options: SubmitWritesOptions = {}): SubmitWrites {
  const limits = options.limits ?? SUBMIT_WRITE_LIMITS;
  const { onBatch } = options;
  const stores = groupCommit(
    (batch: readonly Traced<NewSubmission>[]) => {
      const { parent, links } = batchSpanParent(batch.map((b) => b.trace));
      return insertSubmitting(db, batch.map((b) => b.value), parent, links);
    },
    // One per customer in a batch: the second waits, and meets the first one in flight.
    { limits: { ...limits, maxQueuedMs: options.storeQueueLimitMs ?? STORE_QUEUE_LIMIT_MS, maxRewrittenMs: STORE_REWRITE_LIMIT_MS }, keyOf: (b) => b.value.customerUuid, ...(onBatch ? { onBatch: (size: number) => onBatch('insert_submitting', size) } : {}) },
  );
  const acceptances = groupCommit(
    (batch: readonly Traced<Acceptance>[]) => {
      const { parent, links } = batchSpanParent(batch.map((b) => b.trace));
      return markSubmitted(db, batch.map((b) => b.value), parent, links);
    },
    { limits, ...(onBatch ? { onBatch: (size: number) => onBatch('mark_submitted', size) } : {}) },
  );
  return {
    store: (value, trace) => stores.add({ value, trace }),
    async accept(value, trace) {
      const found = await acceptances.add({ value, trace });
      if (!found) throw new Error(`underwriting request ${value.id} vanished before its acceptance was recorded`);
    },
    close: async () => {
      await Promise.all([stores.close(), acceptances.close()]);
    },
  };
}
