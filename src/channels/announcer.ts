import type { FastifyBaseLogger } from 'fastify';
import { type Kysely, sql } from 'kysely';
import type { SqlSnapshot } from '../db/statements.js';
import type { Tables } from '../db/types.js';

export interface Announcer {
  /** Queues a NOTIFY of key for something just committed; never waits, never throws. */
  announce(key: string): void;
  /** Sends what is queued and stops. */
  close(): Promise<void>;
}

/** Keys announced per statement, at most. */
const BATCH = 500;

/**
 * Keys share a notification, one per line (a key never holds a line break), so that one commit of
 * many callbacks is a few notifications, not one each: each costs the notifying backend, every
 * listening backend and every listening instance. Below PostgreSQL's 8000-byte payload limit.
 */
export const KEY_SEPARATOR = '\n';
const PAYLOAD_BYTES = 7900;

/** The keys as few payloads as fit; a key too long for any payload is dropped (its waiters answer at their deadline). */
export function packKeys(keys: readonly string[]): string[] {
  const payloads: string[] = [];
  let current: string[] = [];
  let bytes = 0;
  for (const key of keys) {
    const size = Buffer.byteLength(key);
    if (size === 0 || size > PAYLOAD_BYTES || key.includes(KEY_SEPARATOR)) continue;
    // Each key after the first costs its separator too.
    if (current.length > 0 && bytes + 1 + size > PAYLOAD_BYTES) {
      payloads.push(current.join(KEY_SEPARATOR));
      current = [];
    }
    bytes = current.length === 0 ? size : bytes + 1 + size;
    current.push(key);
  }
  if (current.length > 0) payloads.push(current.join(KEY_SEPARATOR));
  return payloads;
}

/** The keys of one notification's payload (an older instance's payload is a single key). */
export function unpackKeys(payload: string): string[] {
  return payload.split(KEY_SEPARATOR).filter((key) => key !== '');
}

/**
 * At least this long between two NOTIFY statements of one announcer. Under callback load a commit
 * ends every few milliseconds, and each NOTIFY statement is a transaction that costs the notifying
 * backend, every listening backend and every listening instance (with one per commit, the notifying
 * backend's CPU was a large share of the callback statements' own: docs/assumptions.md); spaced,
 * the commits of those milliseconds share one. The first after a quiet spell goes at once. Only
 * other instances wait for it: this one wakes its own waiters when it announces (channel.ts).
 */
export const ANNOUNCE_SPACING_MS = 10;

/**
 * NOTIFYs keys on one channel from its own transaction, after the committing statement (e.g. a
 * callback's), coalescing everything queued meanwhile (and for ANNOUNCE_SPACING_MS after the
 * previous statement) into one statement. Not inside that statement:
 * PostgreSQL holds a database-wide lock from a notifying transaction's commit until its WAL flush,
 * which serialises every callback commit behind one fsync at a time (callback throughput fell
 * several-fold: docs/assumptions.md). This transaction is not durable (synchronous_commit off;
 * notifications never are): if it is lost, a long-poll answers at its deadline from what is stored.
 */
export function announcer(db: Kysely<Tables>, channel: string, log: FastifyBaseLogger, spacingMs = ANNOUNCE_SPACING_MS): Announcer {
  const pending = new Set<string>();
  let flushing: Promise<void> | undefined;
  let lastAt = Number.NEGATIVE_INFINITY;

  async function flush(): Promise<void> {
    while (pending.size > 0) {
      const wait = lastAt + spacingMs - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      lastAt = performance.now();
      const batch = [...pending].slice(0, BATCH);
      for (const key of batch) pending.delete(key);
      try {
        await notifyKeys(db, channel, batch);
      } catch (err) {
        log.warn({ err: { message: (err as Error).message }, customers: batch.length }, 'could not announce stored results; long-polls will answer at their deadline');
      }
    }
    flushing = undefined;
  }

  return {
    announce(key) {
      pending.add(key);
      // One statement in flight at a time; whatever arrives meanwhile rides on the next one.
      flushing ??= new Promise<void>((resolve) => setImmediate(resolve)).then(flush);
    },
    close: async () => {
      await flushing;
    },
  };
}

/** One notification per packed payload of `keys`, in a transaction of its own that is not waited to disk. */
export async function notifyKeys(db: Kysely<Tables>, channel: string, keys: readonly string[]): Promise<void> {
  await sql`select set_config('synchronous_commit', 'off', true), pg_notify(${channel}::text, c)::text
            from unnest(${packKeys(keys)}::text[]) as c`.execute(db);
}

/** The notification as `npm run sql:snapshot` writes it (docs/layout.md). */
export const SQL_SNAPSHOTS: readonly SqlSnapshot[] = [{ name: 'notify_keys', run: (db) => notifyKeys(db, 'results', ['c']) }];
