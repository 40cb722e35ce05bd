import { EventEmitter } from 'node:events';
import type { PGlite } from '@electric-sql/pglite';
import type { FastifyBaseLogger } from 'fastify';
import pg from 'pg';
import type { Database } from '../db/database.js';

type Log = Pick<FastifyBaseLogger, 'info' | 'warn' | 'debug'>;

/** Past this many waiters in one process, new ones are refused rather than let memory grow unbounded. */
export const DEFAULT_MAX_WAITERS = 2000;

const RECONNECT_MIN_MS = 100;
const RECONNECT_MAX_MS = 5000;
/** A half-open connection (no RST ever arrives) is noticed by this heartbeat, not only by TCP keepalive. */
const HEARTBEAT_MS = 30_000;

/** One waiting party: woken by a notification for its key, or by a (re)connect of the listener. */
export class Waiter {
  #woken = false;
  #resolve: (() => void) | undefined;

  constructor(
    readonly key: string,
    private readonly onCancel: (waiter: Waiter) => void,
    private readonly onBlock: (waiter: Waiter) => void = () => {},
  ) {}

  wake(): void {
    this.#woken = true;
    this.#resolve?.();
  }

  /** Resolves at the next wake (at once if one came since the last call), after ms, or on abort. */
  next(ms: number, signal: AbortSignal): Promise<void> {
    if (this.#woken || signal.aborted) {
      this.#woken = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.#resolve = undefined;
        this.#woken = false;
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener('abort', done, { once: true });
      this.#resolve = done;
      this.onBlock(this);
    });
  }

  cancel(): void {
    this.#resolve = undefined;
    this.onCancel(this);
  }
}

interface SourceHandlers {
  onNotify(payload: string): void;
  /** LISTEN is in effect (first time, or again after a loss): anything may have happened meanwhile. */
  onListening(): void;
}

interface Source {
  stop(): Promise<void>;
}

/**
 * Listens on one NOTIFY channel over a single connection and wakes the waiters registered under the
 * payload. Events: 'listening' (after every successful LISTEN), 'lost' (connection gone), 'waiting' (a
 * waiter blocked until its next wake).
 */
export class ChannelListener extends EventEmitter {
  maxWaiters = DEFAULT_MAX_WAITERS;
  #byKey = new Map<string, Set<Waiter>>();
  #count = 0;
  #listening = false;
  #source: Source | undefined;

  constructor(
    readonly channel: string,
    private readonly log: Log,
  ) {
    super();
  }

  get waiterCount(): number {
    return this.#count;
  }

  /** True while LISTEN is in effect on a live connection. */
  get listening(): boolean {
    return this.#listening;
  }

  /** Registers a waiter for key, or returns undefined when the process already holds maxWaiters. */
  register(key: string): Waiter | undefined {
    if (this.#count >= this.maxWaiters) return undefined;
    const waiter = new Waiter(
      key,
      (w) => this.#unregister(w),
      (w) => this.emit('waiting', w.key),
    );
    let set = this.#byKey.get(key);
    if (!set) this.#byKey.set(key, (set = new Set()));
    set.add(waiter);
    this.#count += 1;
    return waiter;
  }

  #unregister(waiter: Waiter): void {
    const set = this.#byKey.get(waiter.key);
    if (!set?.delete(waiter)) return;
    this.#count -= 1;
    if (set.size === 0) this.#byKey.delete(waiter.key);
  }

  /** Wakes everyone, e.g. so that they re-check state after notifications may have been missed. */
  wakeAll(): void {
    for (const set of this.#byKey.values()) for (const w of set) w.wake();
  }

  start(database: Pick<Database, 'engine' | 'connectionString' | 'pglite'>): void {
    const handlers: SourceHandlers = {
      onNotify: (payload) => {
        const set = this.#byKey.get(payload);
        if (set) for (const w of set) w.wake();
      },
      onListening: () => {
        this.#listening = true;
        this.emit('listening');
        this.wakeAll();
      },
    };
    const onLost = () => {
      this.#listening = false;
      this.emit('lost');
    };
    if (database.pglite) this.#source = pgliteSource(database.pglite, this.channel, this.log, handlers);
    else if (database.connectionString) {
      this.#source = postgresSource(database.connectionString, this.channel, this.log, handlers, onLost);
    } else throw new Error('a database has either a PGlite instance or a connection string');
  }

  async stop(): Promise<void> {
    this.#listening = false;
    await this.#source?.stop();
    this.#source = undefined;
    // Nobody will be notified any more: let every waiter answer with what is stored.
    this.wakeAll();
  }
}

/** A dedicated pg.Client that LISTENs, and comes back by itself (with backoff) after any loss. */
function postgresSource(
  connectionString: string,
  channel: string,
  log: Log,
  handlers: SourceHandlers,
  onLost: () => void,
): Source {
  let stopped = false;
  let failures = 0;
  let client: pg.Client | undefined;
  let retry: NodeJS.Timeout | undefined;
  let heartbeat: NodeJS.Timeout | undefined;

  const schedule = () => {
    const ceiling = Math.min(RECONNECT_MAX_MS, RECONNECT_MIN_MS * 2 ** failures);
    failures += 1;
    // Jitter, so that a fleet of instances does not reconnect in lockstep after an outage.
    retry = setTimeout(connect, ceiling / 2 + Math.random() * (ceiling / 2));
    retry.unref();
  };

  const connect = async () => {
    retry = undefined;
    if (stopped) return;
    const c = new pg.Client({
      connectionString,
      keepAlive: true,
      connectionTimeoutMillis: 3000,
      query_timeout: 5000,
      application_name: 'underwriting-gateway-listener',
    });
    client = c;
    let lost = false;
    const lose = (err?: Error) => {
      if (lost) return;
      lost = true;
      if (client === c) client = undefined;
      clearInterval(heartbeat);
      c.end().catch(() => {});
      onLost();
      if (stopped) return;
      log.warn({ channel, err: err ? { message: err.message, code: (err as { code?: string }).code } : undefined }, 'notification listener lost its connection; reconnecting');
      schedule();
    };
    // Never let a dropped listener connection become an uncaught exception.
    c.on('error', lose);
    c.on('end', () => lose());
    c.on('notification', (msg) => {
      if (msg.channel === channel && msg.payload) handlers.onNotify(msg.payload);
    });
    try {
      await c.connect();
      await c.query(`LISTEN ${c.escapeIdentifier(channel)}`);
    } catch (err) {
      lose(err as Error);
      return;
    }
    if (stopped || lost) return;
    if (failures > 0) log.info({ channel }, 'notification listener reconnected');
    else log.debug({ channel }, 'notification listener started');
    failures = 0;
    heartbeat = setInterval(() => {
      c.query('select 1').catch((err: Error) => lose(err));
    }, HEARTBEAT_MS);
    heartbeat.unref();
    handlers.onListening();
  };

  void connect();
  return {
    async stop() {
      stopped = true;
      clearTimeout(retry);
      clearInterval(heartbeat);
      const c = client;
      client = undefined;
      await c?.end().catch(() => {});
    },
  };
}

/** PGlite is one in-process engine: its listen() never loses a connection. */
function pgliteSource(pglite: PGlite, channel: string, log: Log, handlers: SourceHandlers): Source {
  const unlisten = pglite.listen(channel, (payload) => handlers.onNotify(payload)).then(
    (u) => {
      handlers.onListening();
      return u;
    },
    (err: Error) => {
      log.warn({ channel, err: { message: err.message } }, 'could not listen for notifications');
      return undefined;
    },
  );
  return {
    async stop() {
      const u = await unlisten;
      if (u && !pglite.closed) await u().catch(() => {});
    },
  };
}

interface Shared {
  listener: ChannelListener;
  refs: number;
}

/** One listener (one connection) per database and channel in this process, however many apps use it. */
const shared = new Map<string | PGlite, Map<string, Shared>>();

export interface ListenerLease {
  listener: ChannelListener;
  /** Gives the lease back; the last one stops the listener and closes its connection. */
  release(): Promise<void>;
}

export function acquireListener(
  database: Pick<Database, 'engine' | 'connectionString' | 'pglite'>,
  channel: string,
  log: Log,
): ListenerLease {
  const key = database.pglite ?? database.connectionString;
  if (key === undefined) throw new Error('a database has either a PGlite instance or a connection string');
  let channels = shared.get(key);
  if (!channels) shared.set(key, (channels = new Map()));
  let entry = channels.get(channel);
  if (!entry) {
    entry = { listener: new ChannelListener(channel, log), refs: 0 };
    channels.set(channel, entry);
    entry.listener.start(database);
  }
  entry.refs += 1;
  const held = entry;
  let released = false;
  return {
    listener: held.listener,
    async release() {
      if (released) return;
      released = true;
      held.refs -= 1;
      if (held.refs > 0) return;
      channels.delete(channel);
      if (channels.size === 0) shared.delete(key);
      await held.listener.stop();
    },
  };
}
