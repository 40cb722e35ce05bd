import type { FastifyBaseLogger } from 'fastify';
import { type Kysely, sql } from 'kysely';
import { RESULTS_CHANNEL } from '../db/channels.js';
import type { DB } from '../db/types.js';

export interface ResultAnnouncer {
  /** Queues a NOTIFY for a customer whose result was just committed; never waits, never throws. */
  announce(customerUuid: string): void;
  /** Sends what is queued and stops. */
  close(): Promise<void>;
}

/** Customers announced per statement, at most. */
const BATCH = 500;

/**
 * NOTIFYs stored results on RESULTS_CHANNEL from its own transaction, after the callback's commit,
 * coalescing everything queued meanwhile into one statement. Not inside the callback's statement:
 * PostgreSQL holds a database-wide lock from a notifying transaction's commit until its WAL flush,
 * which serialises every callback commit behind one fsync at a time (measured: 8x fewer callbacks
 * per second). This transaction is not durable (synchronous_commit off; notifications never are):
 * if it is lost, a long-poll answers at its deadline from what is stored.
 */
export function resultAnnouncer(db: Kysely<DB>, log: FastifyBaseLogger): ResultAnnouncer {
  const pending = new Set<string>();
  let flushing: Promise<void> | undefined;

  async function flush(): Promise<void> {
    while (pending.size > 0) {
      const batch = [...pending].slice(0, BATCH);
      for (const customerUuid of batch) pending.delete(customerUuid);
      try {
        await sql`select set_config('synchronous_commit', 'off', true), pg_notify(${RESULTS_CHANNEL}::text, c)::text
                  from unnest(${batch}::text[]) as c`.execute(db);
      } catch (err) {
        log.warn({ err: { message: (err as Error).message }, customers: batch.length }, 'could not announce stored results; long-polls will answer at their deadline');
      }
    }
    flushing = undefined;
  }

  return {
    announce(customerUuid) {
      pending.add(customerUuid);
      // One statement in flight at a time; whatever arrives meanwhile rides on the next one.
      flushing ??= new Promise<void>((resolve) => setImmediate(resolve)).then(flush);
    },
    close: async () => {
      await flushing;
    },
  };
}
