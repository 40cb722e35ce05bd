import net from 'node:net';
import pg from 'pg';
import { backoff } from '../timing/backoff.js';
import type { Log, Source, SourceHandlers } from './source.js';

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
/** How long stop() lets a LISTEN connection that answers end politely before it destroys its socket. */
export const STOP_GRACE_MS = 1000;

/** A dedicated pg.Client that LISTENs, and comes back by itself (with backoff) after any loss. */
export function postgresSource(
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
  /** The client once its LISTEN was answered: until then it has nothing to end politely. */
  let listening: pg.Client | undefined;
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
      if (listening === c) listening = undefined;
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
    listening = c;
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
      // A connection still being set up, or whose heartbeat is unanswered, has not shown that the
      // database answers: at the end of a shutdown on a silent database, waiting out the grace for
      // it held the exit a second that a loaded machine's shutdown may not have (likely the cause of a
      // CI failure: exit code 1 after a 503 at the end of the grace). Destroyed at once.
      if (c && (c !== listening || checking)) socket?.destroy();
      // Ending waits for the server to close the connection; a half-open one never does.
      const timer = setTimeout(() => socket?.destroy(), STOP_GRACE_MS);
      await c?.end().catch(() => {});
      clearTimeout(timer);
    },
  };
}
