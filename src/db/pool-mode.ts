import { randomBytes } from 'node:crypto';
import type pg from 'pg';

/** What the gateway says when DATABASE_POOL_MODE=session meets a pooler that does not keep sessions. */
export const POOL_MODE_MISMATCH =
  'named prepared statements do not survive between transactions: DATABASE_URL points at a transaction-pooling PgBouncer (or the like), ' +
  'but DATABASE_POOL_MODE is session; set DATABASE_POOL_MODE=transaction (and DATABASE_LISTEN_URL to a direct connection), or pool in session mode';


/** The SQLSTATEs of a named statement that is missing (26000) or already there (42P05) on the server connection a query got. */
export function isPreparedStatementMismatch(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '26000' || code === '42P05';
}

/**
 * How many times the check looks. One look can be fooled behind a transaction pooler while other
 * clients use it: their released server connection, not the one the check just used, is handed to
 * the check's second connection, and the first then gets its own server connection back by chance
 * (3 looks of 30 were fooled so, test/db/pool-mode.test.ts). Each look has its own chance of
 * catching it; a direct connection or a session pooler passes every look.
 */
const POOL_MODE_LOOKS = 5;

/**
 * Resolves when a named prepared statement survives between transactions (a direct connection, or
 * a session pooler); rejects with POOL_MODE_MISMATCH otherwise. One connection prepares and runs a
 * named statement; a second holds a transaction open on the server connection a transaction pooler
 * reuses first (the one just released); the first then runs its statement again. In session mode it
 * runs on the same server connection; behind a transaction pooler it lands on another, where the
 * statement does not exist (or the backend differs), or the second connection was given the first's
 * server connection (two clients on one backend: no session of its own). POOL_MODE_LOOKS looks, on
 * the same two connections.
 */
export async function verifySessionPooling(pool: pg.Pool): Promise<void> {
  const first = await pool.connect();
  let second: pg.PoolClient | undefined;
  let failure: Error | undefined;
  try {
    second = await pool.connect();
    for (let look = 0; look < POOL_MODE_LOOKS && !failure; look++) {
      // A name of its own each time: behind a transaction pooler an earlier look's statement stays on some server connection.
      const probe = { name: `ugw_pool_mode_probe_${randomBytes(8).toString('hex')}`, text: 'select pg_backend_pid() as pid' };
      const before = (await first.query<{ pid: number }>(probe)).rows[0]!.pid;
      await second.query('begin');
      const held = (await second.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
      let after: number | undefined;
      try {
        after = (await first.query<{ pid: number }>(probe)).rows[0]!.pid;
      } catch (err) {
        if (!isPreparedStatementMismatch(err)) throw err;
      }
      await second.query('rollback');
      if (after !== before || held === before) failure = new Error(POOL_MODE_MISMATCH);
    }
  } finally {
    // Gone for good: the probes' statements (or pg's belief in them) must not outlive the check.
    first.release(true);
    second?.release(true);
  }
  if (failure) throw failure;
}
