import { randomBytes } from 'node:crypto';
import { type Kysely, sql } from 'kysely';
import type pg from 'pg';
import type { Tables } from './types.js';

/** What the gateway says when DATABASE_POOL_MODE=session meets a pooler that does not keep sessions. */
export const POOL_MODE_MISMATCH =
  'named prepared statements do not survive between transactions: DATABASE_URL points at a transaction-pooling PgBouncer (or the like), ' +
  'but DATABASE_POOL_MODE is session; set DATABASE_POOL_MODE=transaction (and DATABASE_LISTEN_URL to a direct connection), or pool in session mode';


/**
 * The check's error when it did not finish rather than find a mismatch (which passes as it is): two
 * connections at once that never both got a server connection, as behind a session pooler whose
 * pool is full (each connection holds its server connection for its whole life).
 */
export function unfinishedCheck(err: unknown): never {
  const message = err instanceof Error ? err.message : String(err);
  if (message === POOL_MODE_MISMATCH) throw err;
  throw new Error(
    `the DATABASE_POOL_MODE=session check did not finish (${message}): it holds a transaction on two connections at once; ` +
      "behind a session pooler each of the gateway's connections holds a server connection for its whole life, " +
      "so the pooler's pool for this database and user (PgBouncer: default_pool_size, max_db_connections) must have room for every instance's connections",
    { cause: err },
  );
}

/** The SQLSTATEs of a named statement that is missing (26000) or already there (42P05) on the server connection a query got. */
export function isPreparedStatementMismatch(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '26000' || code === '42P05';
}

/**
 * Rounds of the check. The first can be fooled while other clients use the pooler (they take a
 * server connection just released and give it back in time); each later round must be fooled too,
 * so a few more make the check as good as certain.
 */
const POOL_MODE_ROUNDS = 8;

/** How long the second connection's transaction may wait for a server connection while the first holds one. */
const SECOND_BEGIN_WAIT_MS = 1_000;

/**
 * Resolves when a named prepared statement survives between transactions (a direct connection, or
 * a session pooler); rejects with POOL_MODE_MISMATCH otherwise. Two connections each run their own
 * named statement (prepared once, then bound and executed only), which tells the backend it ran on.
 * In session mode each connection stays on the backend it began on, and the two never share one.
 *
 * Each round holds a transaction open on both connections at once (so they are on two backends;
 * but see SECOND_BEGIN_WAIT_MS), ends the first's, then the second's, and runs the statement again
 * on the second, then on the first, each in a transaction of its own. A transaction pooler then
 * hands out idle server connections in an order of its own, and either order moves one of them:
 * the most recently released first (PgBouncer's default) gives the first connection the second's
 * backend; the least recently released first (`server_round_robin = 1`) gives the second
 * connection the first's, or an older idle one. Moved, the statement is missing there, or the
 * backend differs from the one the connection began on: the mismatch. To pass behind a
 * transaction pooler, the pooler would have to hand each connection its own backend back at every
 * round, whatever its order and while other clients come and go.
 */
export async function verifySessionPooling(pool: pg.Pool): Promise<void> {
  const clients: pg.PoolClient[] = [];
  try {
    clients.push(await pool.connect());
    clients.push(await pool.connect());
    // Names of their own: behind a transaction pooler an earlier check's statements stay on some server connection.
    const probes = clients.map(() => ({ name: `ugw_pool_mode_probe_${randomBytes(8).toString('hex')}`, text: 'select pg_backend_pid() as pid' }));
    const began: Array<number | undefined> = clients.map(() => undefined);
    /** The backend the statement ran on, or undefined when it was missing there (or is there already). */
    const backendOf = async (i: number): Promise<number | undefined> => {
      try {
        return (await clients[i]!.query<{ pid: number }>(probes[i]!)).rows[0]!.pid;
      } catch (err) {
        if (!isPreparedStatementMismatch(err)) throw err;
        return undefined;
      }
    };
    /** False when connection i is not on the backend it began on (or on the other's). */
    const onItsOwn = (i: number, pid: number | undefined): boolean => {
      if (pid === undefined) return false;
      began[i] ??= pid;
      return began[i] === pid && began.every((other, j) => j === i || other !== pid);
    };
    const [first, second] = clients as [pg.PoolClient, pg.PoolClient];
    for (let round = 0; round < POOL_MODE_ROUNDS; round++) {
      await first.query('begin');
      let firstOpen = true;
      const endFirst = async () => {
        if (!firstOpen) return;
        firstOpen = false;
        await first.query('commit');
      };
      try {
        if (!onItsOwn(0, await backendOf(0))) return mismatch();
        // Behind a transaction pooler with a single server connection, the second waits for the
        // first's: ended, the second gets that very backend (the mismatch), rather than a wait.
        const secondBegun = second.query('begin');
        let timer: NodeJS.Timeout | undefined;
        const waited = await Promise.race([
          secondBegun.then(() => false),
          new Promise<boolean>((resolve) => {
            timer = setTimeout(() => resolve(true), SECOND_BEGIN_WAIT_MS);
          }),
        ]).finally(() => clearTimeout(timer));
        if (waited) await endFirst();
        await secondBegun;
        const secondPid = await backendOf(1);
        // The first's server connection released before the second's.
        await endFirst();
        await second.query('commit');
        if (!onItsOwn(1, secondPid)) return mismatch();
      } finally {
        // An error of its own (a connection gone) must not hide the mismatch or the first error.
        await endFirst().catch(() => undefined);
      }
      // Both released, the first before the second: whichever of them a transaction pooler hands
      // out first, one connection gets a backend not its own.
      if (!onItsOwn(1, await backendOf(1))) return mismatch();
      if (!onItsOwn(0, await backendOf(0))) return mismatch();
    }
  } finally {
    // Gone for good: the probes' statements (or pg's belief in them) must not outlive the check.
    for (const client of clients) client.release(true);
  }
}

function mismatch(): never {
  throw new Error(POOL_MODE_MISMATCH);
}

/**
 * Behind a transaction pooler the gateway sets no `statement_timeout` (a pooler refuses the
 * startup parameter, and a session's SET would stay on a server connection for others): its query
 * timeout is the client's alone, and a statement it gave up on (answered 503) may still run, and
 * commit, on the server. A warning when the server's own timeout, as the gateway's role and
 * database get it, is off or longer than the gateway's; undefined when it is not.
 */
export async function serverTimeoutWarning(db: Kysely<Tables>, queryTimeoutMs: number): Promise<{ message: string; statementTimeoutMs: number } | undefined> {
  const { rows } = await sql<{ ms: number }>`select setting::int as ms from pg_settings where name = 'statement_timeout'`.execute(db);
  const statementTimeoutMs = rows[0]?.ms ?? 0;
  if (statementTimeoutMs > 0 && statementTimeoutMs <= queryTimeoutMs) return undefined;
  const message =
    `behind a transaction pooler (DATABASE_POOL_MODE=transaction) the server's statement_timeout is ${statementTimeoutMs === 0 ? 'off' : `${statementTimeoutMs} ms`}: ` +
    `a statement the gateway gave up on after ${queryTimeoutMs} ms (answered 503) may still run and commit on the server; ` +
    `set it on the gateway's role, e.g. ALTER ROLE <user> SET statement_timeout = '${queryTimeoutMs / 1000}s'`;
  return { message, statementTimeoutMs };
}
