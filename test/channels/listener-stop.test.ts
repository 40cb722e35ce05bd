import t from 'tap';
import { postgresSource, STOP_GRACE_MS } from '../../src/channels/postgres-source.js';
import { freshDatabaseUrl, SERVER_URL } from '../helpers/database.js';
import { captureLogs } from '../helpers/logs.js';
import { startRelay, throughRelay } from '../helpers/relay.js';
import { until } from '../helpers/until.js';

// Stopping the LISTEN connection at shutdown: one that answers ends politely (the server closes
// it), within a grace. One still being set up on a database that went silent has nothing to end
// politely and never would: the grace was a second of the shutdown's own 10 s, spent after a stuck
// request's 503 (shutdown-stuck-database.test.ts), and on a loaded machine the exit came too late.

// PostgreSQL only: PGlite's listen() has no connection of its own.
if (SERVER_URL) {
  /** Stops the source, with a timer set just before its own grace timer: did stop() outlast it? */
  async function outlastsGrace(stop: () => Promise<void>): Promise<boolean> {
    let graceOver = false;
    const grace = setTimeout(() => (graceOver = true), STOP_GRACE_MS);
    await stop();
    clearTimeout(grace);
    return graceOver;
  }

  t.test('a LISTEN connection still connecting to a silent database is dropped at once on stop', async (t) => {
    const url = await freshDatabaseUrl(t, { migrated: false });
    const relay = await startRelay(new URL(url).hostname, Number(new URL(url).port || 5432));
    t.teardown(() => relay.close());
    relay.pause();
    let listening = 0;
    const source = postgresSource(throughRelay(url, relay), 15_000, 'stop_test', captureLogs().logger, { onNotify: () => {}, onListening: () => (listening += 1) }, () => {});
    // Its connection was accepted, and the silent database will never answer its startup.
    await until(() => relay.accepted > 0 || undefined, 10_000, 'the connection reaching the silent database');
    t.notOk(await outlastsGrace(() => source.stop()), 'stopped without waiting out the grace');
    t.equal(listening, 0);
  });
}
