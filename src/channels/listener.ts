import { EventEmitter } from 'node:events';
import type { DatabaseHandle } from '../db/handle.js';
import { unpackKeys } from './announcer.js';
import { pgliteSource } from './pglite-source.js';
import { postgresSource } from './postgres-source.js';
import type { Log, Source, SourceHandlers } from './source.js';
import { Waiter } from './waiter.js';

/** Past this many waiters in one process, new ones are refused rather than let memory grow unbounded. */
export const DEFAULT_MAX_WAITERS = 2000;

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
