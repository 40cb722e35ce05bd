import net from 'node:net';
import type { Test } from 'tap';
import { openDatabase } from '../../src/db/database.js';
import type { DatabaseHandle, OpenDatabaseOptions } from '../../src/db/handle.js';
import { migrateToLatest } from '../../src/db/migrator.js';
import { freshDatabaseUrl } from './database.js';

export interface TcpRelay {
  port: number;
  /** Drops every open connection and refuses new ones: the database "goes away". */
  cut(): void;
  /**
   * Swallows whatever the server sends from now on (or, given `after`, from when client bytes
   * containing it pass, e.g. a prepared statement's name), while the client's bytes still reach
   * it: a statement sent then runs (and commits) but its answer never arrives. Until cut() or restore().
   */
  blackhole(after?: string): void;
  /**
   * Like cut(), but a connection sitting idle (the server spoke last) is not closed: it dies when it
   * is next used, as connections of a blink do that the pool learns of only by using them. New
   * connections go through (cut() refuses them until restore()).
   */
  cutBusyLeavingIdleToDie(): void;
  /** Lets connections through again. */
  restore(): void;
  /**
   * Goes silent in both directions without FIN or RST: bytes on open connections are swallowed,
   * new connections are accepted but get no answer. Half-open connections, as a network path that
   * went dark leaves them.
   */
  pause(): void;
  /** After pause(): new connections (and those accepted during the pause) go through; the old ones stay silent for good. */
  admitNew(): void;
  /** Connections accepted so far. */
  readonly accepted: number;
  /** Bytes a client sent on a silenced connection (after pause()), swallowed: a statement went out and will get no answer. */
  readonly swallowed: number;
  close(): Promise<void>;
}

interface RelayedConnection {
  /** Swallows every byte, both ways, forever (pause()). */
  silenced: boolean;
  /** Closed when the client next sends anything (cutBusyLeavingIdleToDie()). */
  doomed: boolean;
  /** The client sent the last bytes relayed: a statement awaits its answer. */
  clientSpokeLast: boolean;
  drop: () => void;
}

/** A TCP relay in front of host:port that a test can cut, to simulate an outage of a real server. */
export async function startRelay(host: string, port: number): Promise<TcpRelay> {
  const open = new Set<net.Socket>();
  /** Relayed connections. */
  const relayed = new Set<RelayedConnection>();
  let held: net.Socket[] = [];
  let cut = false;
  let blackholed = false;
  let blackholeAfter: string | undefined;
  let paused = false;
  let accepted = 0;
  let swallowed = 0;
  const relay = (client: net.Socket) => {
    // Half-open both ways: a FIN is passed on only while the connection is not silenced, as a
    // network path that went dark would not deliver it either.
    const upstream = net.connect({ host, port, allowHalfOpen: true });
    open.add(client);
    open.add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
      relayed.delete(state);
    };
    const state: RelayedConnection = { silenced: false, doomed: false, clientSpokeLast: false, drop };
    relayed.add(state);
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.on('data', (chunk: Buffer) => {
      if (state.doomed) {
        drop();
        return;
      }
      state.clientSpokeLast = true;
      if (blackholeAfter !== undefined && chunk.includes(blackholeAfter)) blackholed = true;
      if (!state.silenced) upstream.write(chunk);
      else swallowed += chunk.length;
    });
    upstream.on('data', (chunk: Buffer) => {
      if (!state.silenced && !blackholed) {
        state.clientSpokeLast = false;
        client.write(chunk);
      }
    });
    client.on('end', () => {
      if (!state.silenced) upstream.end();
    });
    upstream.on('end', () => {
      if (!state.silenced) client.end();
    });
    client.resume();
  };
  const server = net.createServer({ allowHalfOpen: true }, (client) => {
    accepted += 1;
    if (cut) {
      client.destroy();
      return;
    }
    if (paused) {
      // Accepted, and not read: the client waits for an answer that does not come (yet).
      client.pause();
      open.add(client);
      client.on('error', () => client.destroy());
      held.push(client);
      return;
    }
    relay(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    cut() {
      cut = true;
      for (const socket of open) socket.destroy();
      open.clear();
    },
    cutBusyLeavingIdleToDie() {
      for (const connection of relayed) {
        if (connection.clientSpokeLast) connection.drop();
        else connection.doomed = true;
      }
      blackholed = false;
      blackholeAfter = undefined;
    },
    blackhole(after) {
      if (after === undefined) blackholed = true;
      else blackholeAfter = after;
    },
    restore() {
      cut = false;
      blackholed = false;
      blackholeAfter = undefined;
    },
    pause() {
      paused = true;
      for (const state of relayed) state.silenced = true;
    },
    admitNew() {
      paused = false;
      const waiting = held;
      held = [];
      for (const client of waiting) if (!client.destroyed) relay(client);
    },
    get accepted() {
      return accepted;
    },
    get swallowed() {
      return swallowed;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of open) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/**
 * Resolves once the event loop's current poll phase is over. The FINs of a cut() reach every
 * connection it ended together: when one of them has failed a request (its answer came in this
 * phase), the others' may still wait, and a read through the same pool right away could take an
 * idle connection already ended ("Connection terminated unexpectedly"). After this, the pool has dropped them.
 */
export const cutSeen = () => new Promise<void>((resolve) => setImmediate(resolve));

/** The same URL, reaching its server through the relay instead. */
export function throughRelay(databaseUrl: string, relay: TcpRelay): string {
  const url = new URL(databaseUrl);
  url.hostname = '127.0.0.1';
  url.port = String(relay.port);
  return url.toString();
}

/**
 * A fresh, migrated PostgreSQL database reached through a relay the test can cut: the database
 * "goes away" and comes back while the app keeps running. PostgreSQL only.
 */
export async function databaseBehindRelay(
  t: Test,
  options: Omit<OpenDatabaseOptions, 'databaseUrl' | 'dataDir'> = {},
): Promise<{ database: DatabaseHandle; relay: TcpRelay; url: string }> {
  const url = await freshDatabaseUrl(t);
  const relay = await startRelay(new URL(url).hostname, Number(new URL(url).port || 5432));
  t.teardown(() => relay.close());
  const database = await openDatabase({ ...options, databaseUrl: throughRelay(url, relay), dataDir: 'unused' });
  t.teardown(() => database.close());
  await migrateToLatest(database);
  return { database, relay, url };
}
