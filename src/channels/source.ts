// Where a listener's notifications come from: a LISTEN connection of its own (PostgreSQL) or PGlite's listen().
import type { FastifyBaseLogger } from 'fastify';

export type Log = Pick<FastifyBaseLogger, 'info' | 'warn' | 'debug'>;

export interface SourceHandlers {
  onNotify(payload: string): void;
  /** LISTEN is in effect (first time, or again after a loss): anything may have happened meanwhile. */
  onListening(): void;
}

export interface Source {
  /** Checks the connection now (e.g. when another connection to the database was found half-open). */
  check(): void;
  /** The database answers again: reconnect now if waiting to retry. */
  retryNow(): void;
  stop(): Promise<void>;
}
