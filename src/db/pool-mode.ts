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
 * Turns each of the check's two connections takes. The first turns can be fooled while other
 * clients use the pooler (they take the server connection just released and give it back in time);
 * each later turn must be fooled too, so a few more make the check as good as certain.
 */
const POOL_MODE_ROUNDS = 8;

/**
 * Resolves when a named prepared statement survives between transactions (a direct connection, or
 * a session pooler); rejects with POOL_MODE_MISMATCH otherwise. Two connections take turns, each
 * running its own named statement (prepared once, then bound and executed only) in transactions of
 * its own. In session mode every one of a connection's transactions runs on the backend it began
 * on, and the two never share one. Behind a transaction pooler the next transaction takes the
 * server connection released last (PgBouncer reuses the most recent first): the other connection's
 * backend (the two share one), or, when other clients took that one, another backend, where the
 * statement does not exist. To pass there, the pooler would have to hand each connection its own
 * backend back at every one of the turns while other clients come and go.
 */
export async function verifySessionPooling(pool: pg.Pool): Promise<void> {
  const clients: pg.PoolClient[] = [];
  let mismatch = false;
  try {
    clients.push(await pool.connect());
    clients.push(await pool.connect());
    // Names of their own: behind a transaction pooler an earlier check's statements stay on some server connection.
    const probes = clients.map(() => ({ name: `ugw_pool_mode_probe_${randomBytes(8).toString('hex')}`, text: 'select pg_backend_pid() as pid' }));
    const backends: Array<number | undefined> = clients.map(() => undefined);
    for (let turn = 0; turn < POOL_MODE_ROUNDS * clients.length && !mismatch; turn++) {
      const i = turn % clients.length;
      let pid: number;
      try {
        pid = (await clients[i]!.query<{ pid: number }>(probes[i]!)).rows[0]!.pid;
      } catch (err) {
        if (!isPreparedStatementMismatch(err)) throw err;
        mismatch = true;
        break;
      }
      backends[i] ??= pid;
      mismatch = backends[i] !== pid || backends.some((other, j) => j !== i && other === pid);
    }
  } finally {
    // Gone for good: the probes' statements (or pg's belief in them) must not outlive the check.
    for (const client of clients) client.release(true);
  }
  if (mismatch) throw new Error(POOL_MODE_MISMATCH);
}
