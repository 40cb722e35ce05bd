// Which errors mean the database is out of reach (503, readiness), and which are anything else.

/** Thrown where our own code decides the database is out of reach. */
export class StorageUnavailableError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'StorageUnavailableError';
  }
}

const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN']);
const CONNECTION_MESSAGES =
  /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Query read timeout|Connection ended|PGlite is closed|not queryable|pool (is|has been) (ended|closed)|Cannot use a pool after calling end/i;
/** Kysely's own refusal once the database handle is closed: no other layer says it. */
const DESTROYED_DRIVER = /driver has already been destroyed/;
/**
 * SQLSTATE classes and codes that say "not now" rather than "not this": connection exceptions (08),
 * insufficient resources (53: too many connections, disk full, out of memory), operator
 * intervention (57: admin shutdown, crash shutdown, cannot connect now, statement timeout),
 * system errors (58: I/O), internal errors (XX), a read-only database (25006: a standby after a
 * failover), idle-session timeouts, and transient conflicts (serialization, deadlock, lock timeout).
 */
const UNAVAILABLE_CLASSES = ['08', '53', '57', '58', 'XX'];
const UNAVAILABLE_CODES = new Set(['25006', '25P03', '40001', '40P01', '55P03']);
/**
 * 55000 (object not in prerequisite state) only as a FATAL error, which ends the session: a database
 * closed for maintenance (ALTER DATABASE ... ALLOW_CONNECTIONS false) refuses a connection so. As a
 * statement's ERROR (currval before nextval) it is a bug.
 */
const UNAVAILABLE_WHEN_FATAL = new Set(['55000']);
/** A named prepared statement missing (26000) or already there (42P05): a transaction pooler behind DATABASE_POOL_MODE=session. */
const POOLER_CODES = new Set(['26000', '42P05']);
const SQLSTATE = /^[0-9A-Z]{5}$/;

/**
 * Errors thrown by the database layer itself (a pooled connection's query or connect, PGlite): only
 * these can mean the database is out of reach. The same ECONNRESET from a client's own socket (an
 * aborted upload) once took an instance out of its load balancer.
 */
const databaseErrors = new WeakSet<object>();

/** Marks an error as the database layer's (then isStorageUnavailable reads what it says). */
export function markDatabaseError(err: unknown): void {
  if (typeof err === 'object' && err !== null) databaseErrors.add(err);
}

/**
 * True when an error means "the database cannot be reached right now" (as opposed to a bug, a
 * constraint, or a client's own failure): connection failures and the SQLSTATEs above of the
 * database layer's errors, our own timeouts.
 */
export function isStorageUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  if (err instanceof StorageUnavailableError || DESTROYED_DRIVER.test(err.message)) return true;
  if (databaseErrors.has(err) && saysUnavailable(err)) return true;
  return err.cause !== undefined && err.cause !== err && isStorageUnavailable(err.cause);
}

/** A pooled connection that had already died (its end not yet seen by the pool), as opposed to a failed connect. */
const DEAD_CONNECTION_MESSAGES = /Connection terminated|Client has encountered a connection error|not queryable|Connection ended/i;

/**
 * True when a database error says the connection it ran on was already gone: after a blink, every
 * idle connection of the pool may be, and the pool drops each only once it fails. Another try
 * draws another connection (or opens a new one), so it may succeed; a refused or timed-out connect
 * says nothing of the sort (the database is out of reach: trying again at once does no good). A
 * connect that the other end closes before it answers reads like a dead connection: tried again,
 * it fails as fast.
 */
export function drewDeadConnection(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  if (databaseErrors.has(err)) {
    const code = (err as { code?: unknown }).code;
    // pg-pool's failed connect reads "Connection terminated due to connection timeout": not one.
    if (/timeout/i.test(err.message)) return false;
    if (code === 'EPIPE' || code === 'ECONNRESET' || DEAD_CONNECTION_MESSAGES.test(err.message)) return true;
  }
  return err.cause !== undefined && err.cause !== err && drewDeadConnection(err.cause);
}

/** What a database layer's error says: its code, its message, its inner errors (a connect to several addresses). */
function saysUnavailable(err: Error): boolean {
  if (err instanceof AggregateError && err.errors.some((e) => e instanceof Error && saysUnavailable(e))) return true;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (NETWORK_CODES.has(code)) return true;
    if (SQLSTATE.test(code) && (UNAVAILABLE_CLASSES.includes(code.slice(0, 2)) || UNAVAILABLE_CODES.has(code))) return true;
    if (UNAVAILABLE_WHEN_FATAL.has(code) && (err as { severity?: unknown }).severity === 'FATAL') return true;
    if (POOLER_CODES.has(code)) return true;
  }
  return CONNECTION_MESSAGES.test(err.message);
}
