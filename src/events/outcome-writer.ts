// The finished attempts, written in batches: one write in flight at a time, kept and retried while the database is away.
import type { Kysely } from 'kysely';
import type { Tables } from '../db/types.js';
import { type FinishedAttempt, recordFinishedAttempts } from './queue-sql.js';

/** Finished attempts written in one statement at most. */
const BATCH = 500;

export interface OutcomeWriterDeps {
  db: Kysely<Tables>;
  /** How long a failed write waits before it is tried again. */
  retryMs: number;
  warn(err: unknown, message: string): void;
  /** The worker is stopping: a failed write is not retried. */
  stopping(): boolean;
  /** A batch was written (the last of a run of writes); `freed`: one of them may free a customer's next delivery. */
  onWritten(freed: boolean): void;
}

export interface OutcomeWriter {
  /** Queues a finished attempt for the next write; `frees`: it may free a later delivery of its customer once written. */
  add(attempt: FinishedAttempt, frees: boolean): void;
  /** The write under way, if any. */
  readonly flushing: Promise<void> | undefined;
}

export function outcomeWriter(deps: OutcomeWriterDeps): OutcomeWriter {
  const finished: FinishedAttempt[] = [];
  /** Finished attempts being written, by what their delivery was: did they free a later one? */
  const frees = new Map<number, boolean>();
  let flushing: Promise<void> | undefined;

  /** One write of finished attempts in flight at a time; whatever finishes meanwhile rides on the next. */
  function flush(): void {
    flushing ??= (async () => {
      let freed = false;
      while (finished.length > 0) {
        const batch = finished.splice(0, BATCH);
        try {
          await recordFinishedAttempts(deps.db, batch);
          for (const o of batch) {
            freed ||= frees.get(o.id) === true;
            frees.delete(o.id);
          }
        } catch (err) {
          // Kept and written once the database is back; meanwhile the leases may run out and the
          // deliveries be sent again (at least once).
          finished.unshift(...batch);
          deps.warn(err, 'could not record event delivery outcomes; retrying');
          if (deps.stopping()) break;
          await new Promise((resolve) => setTimeout(resolve, deps.retryMs));
        }
      }
      flushing = undefined;
      deps.onWritten(freed);
    })();
  }

  return {
    add(attempt, freesNext) {
      frees.set(attempt.id, freesNext);
      finished.push(attempt);
      flush();
    },
    get flushing() {
      return flushing;
    },
  };
}
