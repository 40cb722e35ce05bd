import { setMaxListeners } from 'node:events';
import type { FastifyBaseLogger, FastifyPluginAsync } from 'fastify';
import type { DatabaseHandle } from '../db/handle.js';
import { type Announcer, announcer } from './announcer.js';
import { acquireListener, type ListenerLease } from './lease.js';
import { type LongPoll, longPoll } from './longpoll.js';

/**
 * One kind of notification across every instance sharing the database: a writer announces a key
 * after its commit, and long-polls on that key wake up. app.ts builds one per channel and wires
 * its lifecycle (the plugin); capabilities receive it and use announce or wait.
 */
export interface NotificationChannel {
  readonly name: string;
  /** Queues a NOTIFY of key; call it after the change is committed. Never waits, never throws. */
  announce(key: string): void;
  /**
   * Calls fn after every announcement from this process (at once) and every notification from any
   * instance, whatever its key, and whenever the listener (re)connects; returns the unsubscribe.
   * For readers of "anything new" (the event feed, the delivery worker), not of one key.
   */
  onAny(fn: () => void): () => void;
  /** Reads state until poll.ready says so, a notification for key wakes it, or waitS seconds pass. */
  wait<T>(key: string, waitS: number, poll: LongPoll<T>): Promise<T>;
  /** As wait, woken by every notification whatever its key (the event feed). */
  waitAny<T>(waitS: number, poll: LongPoll<T>): Promise<T>;
  /** Starts listening when the app is ready, answers waiters at once on close, then stops. */
  plugin: FastifyPluginAsync;
}

export function notificationChannel(database: DatabaseHandle, name: string, log: FastifyBaseLogger): NotificationChannel {
  const sender: Announcer = announcer(database.notifyDb, name, log);
  const closing = new AbortController();
  // Every waiting long-poll listens on this one signal; thousands of them are expected, not a leak.
  setMaxListeners(0, closing.signal);
  let lease: ListenerLease | undefined;
  const subscribers = new Set<() => void>();
  const fire = () => {
    for (const fn of subscribers) fn();
  };

  return {
    name,
    announce: (key) => {
      sender.announce(key);
      // This process's own waiters and readers need not wait for the NOTIFY's round trip (nor its
      // spacing): the change is committed.
      lease?.listener.wake(key);
      fire();
    },
    onAny: (fn) => {
      subscribers.add(fn);
      return () => subscribers.delete(fn);
    },
    wait: (key, waitS, poll) => longPoll({ listener: lease?.listener, closing: closing.signal }, key, waitS, poll),
    waitAny: (waitS, poll) => longPoll({ listener: lease?.listener, closing: closing.signal }, undefined, waitS, poll),
    plugin: async (app) => {
      app.addHook('onReady', async () => {
        // One LISTEN connection per process and channel, shared by every waiter; it connects in the background.
        lease = acquireListener(database, name, app.log);
        lease.listener.on('notification', fire);
        lease.listener.on('listening', fire);
      });
      // Long-polls answer with what is stored now instead of holding the shutdown up.
      app.addHook('preClose', async () => closing.abort());
      app.addHook('onClose', async () => {
        closing.abort();
        await sender.close();
        lease?.listener.off('notification', fire);
        lease?.listener.off('listening', fire);
        subscribers.clear();
        await lease?.release();
      });
    },
  };
}
