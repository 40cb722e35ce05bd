// One listener (one connection) per database and channel in this process, leased to whoever needs it.
import type { PGlite } from '@electric-sql/pglite';
import { ChannelListener, type ListenTarget } from './listener.js';
import type { Log } from './source.js';

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
