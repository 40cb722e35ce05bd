// The readiness probe, and the bound on how long a check of the database may take.
import type { Kysely } from 'kysely';
import { runStatement } from './run-statement.js';
import { defineStatement } from './statements.js';
import { StorageUnavailableError } from './storage-errors.js';
import type { Tables } from './types.js';

const READINESS_PROBE = defineStatement(
  'readiness_probe',
  "select current_setting('transaction_read_only') = 'on' as read_only, exists (select 1 from underwriting_requests) as used",
);

/**
 * Runs the readiness probe as the routes run their statements. Its own query timeout is the
 * probe's: a probe stuck on a half-open connection fails in timeoutMs, and that connection (and
 * every one opened before it) is replaced, as after any query timeout.
 */
export async function probeWith(db: Kysely<Tables>, timeoutMs: number): Promise<void> {
  const [row] = await runStatement<{ read_only: boolean }>(db, READINESS_PROBE, [], undefined, undefined, { queryTimeoutMs: timeoutMs });
  // A standby after a failover answers reads and refuses every write the gateway makes.
  if (row?.read_only) throw new StorageUnavailableError('the database is read-only');
}

/** Resolves when work settles within timeoutMs; otherwise rejects as the database being out of reach. */
export async function withTimeout(work: Promise<unknown>, timeoutMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new StorageUnavailableError('database did not answer in time')), timeoutMs);
  });
  try {
    await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
