import { EventEmitter } from 'node:events';
import net from 'node:net';
import type { PGlite } from '@electric-sql/pglite';
import type { FastifyBaseLogger } from 'fastify';
import pg from 'pg';
import { backoff } from '../backoff.js';
import type { DatabaseHandle } from '../db/handle.js';
import { unpackKeys } from './announcer.js';

type Log = Pick<FastifyBaseLogger, 'info' | 'warn' | 'debug'>;

/** Past this many waiters in one process, new ones are refused rather than let memory grow unbounded. */
export const DEFAULT_MAX_WAITERS = 2000;

const RECONNECT_MIN_MS = 100;
/** Retries of a lost LISTEN connection are at most this far apart, so it is back within it of the database. */
const RECONNECT_MAX_MS = 2000;
/**
 * A half-open connection (no RST ever arrives) is noticed by this heartbeat, not only by TCP
 * keepalive: a `select 1` every second, lost when unanswered for LISTENER_QUERY_TIMEOUT_MS, so a
 * silent LISTEN connection is replaced within about 3 s, not after TCP keepalive's much longer wait.
 */
const HEARTBEAT_MS = 1000;
const LISTENER_QUERY_TIMEOUT_MS = 2000;
const STOP_GRACE_MS = 1000;

/**
 * One waiting party: woken by a notification for its key (any notification when it has none), or
 * by a (re)connect of the listener.
 */
export class Waiter {
  #woken = false;
  #resolve: (() => void) | undefined;

  constructor(
    readonly key: string | undefined,
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
  /** Checks the connection now (e.g. when another connection to the database was found half-open). */
  check(): void;
  /** The database answers again: reconnect now if waiting to retry. */
  retryNow(): void;
  stop(): Promise<void>;
}

/** What a listener needs of the database. */
export type ListenTarget = Pick<DatabaseHandle, 'engine' | 'listenConnectionString' | 'pglite' | 'queryTimeoutMs' | 'onHealth'>;

/**
 * Listens on one NOTIFY channel over a single connection and wakes the waiters registered under the
 * payload's keys (announcer.ts packs many into one). Events: 'listening' (after every successful
 * LISTEN), 'lost' (connection gone), 'waiting' (a waiter blocked until its next wake),
 * 'notification' (any payload, for readers of anything new).
 */
export class ChannelListener extends EventEmitter {
  maxWaiters = DEFAULT_MAX_WAITERS;
  #byKey = new Map<string, Set<Waiter>>();
  /** Waiters for anything new (the event feed's). */
  #any = new Set<Waiter>();
  #count = 0;
  #listening = false;
  #source: Source | undefined;
  #unsubscribe: (() => void) | undefined;

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

  /**
   * Registers a waiter for key (without one: for any notification), or returns undefined when the
   * process already holds maxWaiters of that kind: keyed ones (customer long-polls) and keyless
   * ones (the event feed's) each have their own maxWaiters.
   */
  register(key?: string): Waiter | undefined {
    const ofItsKind = key === undefined ? this.#any.size : this.#count - this.#any.size;
    if (ofItsKind >= this.maxWaiters) return undefined;
    const waiter = new Waiter(
      key,
      (w) => this.#unregister(w),
      (w) => this.emit('waiting', w.key),
    );
    let set = key === undefined ? this.#any : this.#byKey.get(key);
    if (!set) this.#byKey.set(key!, (set = new Set()));
    set.add(waiter);
    this.#count += 1;
    return waiter;
  }

  #unregister(waiter: Waiter): void {
    const set = waiter.key === undefined ? this.#any : this.#byKey.get(waiter.key);
    if (!set?.delete(waiter)) return;
    this.#count -= 1;
    if (set.size === 0 && waiter.key !== undefined) this.#byKey.delete(waiter.key);
  }

  /** Wakes the waiters of key, and those of anything: a notification named it, or this process committed it. */
  wake(key: string): void {
    const set = this.#byKey.get(key);
    if (set) for (const w of set) w.wake();
    for (const w of this.#any) w.wake();
  }

  /** Wakes everyone, e.g. so that they re-check state after notifications may have been missed. */
  wakeAll(): void {
    for (const set of this.#byKey.values()) for (const w of set) w.wake();
    for (const w of this.#any) w.wake();
  }

  start(database: ListenTarget): void {
    const handlers: SourceHandlers = {
      onNotify: (payload) => {
        this.emit('notification', payload);
        for (const key of unpackKeys(payload)) this.wake(key);
        for (const w of this.#any) w.wake();
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
    else if (database.listenConnectionString) {
      const source = postgresSource(database.listenConnectionString, database.queryTimeoutMs, this.channel, this.log, handlers, onLost);
      this.#source = source;
      // A query on another connection timed out: this one may be half-open too, silently missing
      // every notification; find out now rather than at the next heartbeat.
      this.#unsubscribe = database.onHealth((event) => (event === 'timeout' ? source.check() : source.retryNow()));
    } else throw new Error('a database has either a PGlite instance or a connection string');
  }

  async stop(): Promise<void> {
    this.#listening = false;
    this.#unsubscribe?.();
    this.#unsubscribe = undefined;
    await this.#source?.stop();
    this.#source = undefined;
    // Nobody will be notified any more: let every waiter answer with what is stored.
    this.wakeAll();
  }
}

/** A dedicated pg.Client that LISTENs, and comes back by itself (with backoff) after any loss. */
function postgresSource(
  connectionString: string,
  queryTimeoutMs: number,
  channel: string,
  log: Log,
  handlers: SourceHandlers,
  onLost: () => void,
): Source {
  let stopped = false;
  let failures = 0;
  let client: pg.Client | undefined;
  let socket: net.Socket | undefined;
  let retry: NodeJS.Timeout | undefined;
  let heartbeat: NodeJS.Timeout | undefined;
  let loseCurrent: ((err?: Error) => void) | undefined;

  const schedule = () => {
    failures += 1;
    // Jittered, so that a fleet of instances does not reconnect in lockstep after an outage.
    retry = setTimeout(connect, backoff(failures, RECONNECT_MIN_MS, RECONNECT_MAX_MS));
    retry.unref();
  };

  const connect = async () => {
    retry = undefined;
    if (stopped) return;
    const s = new net.Socket();
    socket = s;
    const c = new pg.Client({
      connectionString,
      stream: () => s,
      keepAlive: true,
      connectionTimeoutMillis: 3000,
      // A LISTEN or heartbeat unanswered this long means a lost (maybe half-open) connection: the
      // client is then ended, which destroys its socket since a query is still active on it.
      query_timeout: Math.min(queryTimeoutMs, LISTENER_QUERY_TIMEOUT_MS),
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
      // Lost means lost: a half-open connection would never finish ending.
      s.destroy();
      onLost();
      if (stopped) return;
      log.warn({ channel, err: err ? { message: err.message, code: (err as { code?: string }).code } : undefined }, 'notification listener lost its connection; reconnecting');
      schedule();
    };
    loseCurrent = lose;
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
    heartbeat = setInterval(beat, HEARTBEAT_MS);
    heartbeat.unref();
    handlers.onListening();
  };

  let checking = false;
  const beat = () => {
    const c = client;
    if (!c || checking) return;
    checking = true;
    const lose = loseCurrent;
    c.query('select 1')
      .catch((err: Error) => lose?.(err))
      .finally(() => {
        checking = false;
      });
  };

  void connect();
  return {
    check: beat,
    retryNow() {
      if (stopped) return;
      // A heartbeat still unanswered while the database answers on new connections: this one is
      // half-open. Replace it now rather than at the heartbeat's timeout.
      if (checking && client) loseCurrent?.(new Error('heartbeat unanswered while the database answers again'));
      if (retry === undefined) return;
      clearTimeout(retry);
      void connect();
    },
    async stop() {
      stopped = true;
      clearTimeout(retry);
      clearInterval(heartbeat);
      const c = client;
      client = undefined;
      // Ending waits for the server to close the connection; a half-open one never does.
      const timer = setTimeout(() => socket?.destroy(), STOP_GRACE_MS);
      await c?.end().catch(() => {});
      clearTimeout(timer);
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
    check: () => {},
    retryNow: () => {},
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
  database: ListenTarget,
  channel: string,
  log: Log,
): ListenerLease {
  const key = database.pglite ?? database.listenConnectionString;
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
