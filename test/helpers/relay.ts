import net from 'node:net';
import type { Test } from 'tap';
import { type Database, openDatabase } from '../../src/db/database.js';
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
  /** Lets connections through again. */
  restore(): void;
  close(): Promise<void>;
}

/** A TCP relay in front of host:port that a test can cut, to simulate an outage of a real server. */
export async function startRelay(host: string, port: number): Promise<TcpRelay> {
  const open = new Set<net.Socket>();
  let cut = false;
  let blackholed = false;
  let blackholeAfter: string | undefined;
  const server = net.createServer((client) => {
    if (cut) {
      client.destroy();
      return;
    }
    const upstream = net.connect({ host, port });
    open.add(client);
    open.add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.on('data', (chunk: Buffer) => {
      if (blackholeAfter !== undefined && chunk.includes(blackholeAfter)) blackholed = true;
    });
    client.pipe(upstream);
    upstream.on('data', (chunk: Buffer) => {
      if (!blackholed) client.write(chunk);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    cut() {
      cut = true;
      for (const socket of open) socket.destroy();
      open.clear();
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
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of open) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

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
export async function databaseBehindRelay(t: Test): Promise<{ database: Database; relay: TcpRelay; url: string }> {
  const url = await freshDatabaseUrl(t);
  const relay = await startRelay(new URL(url).hostname, Number(new URL(url).port || 5432));
  t.teardown(() => relay.close());
  const database = await openDatabase({ databaseUrl: throughRelay(url, relay), dataDir: 'unused' });
  t.teardown(() => database.close());
  await migrateToLatest(database);
  return { database, relay, url };
}
