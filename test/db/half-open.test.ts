import { once } from 'node:events';
import { performance } from 'node:perf_hooks';
import { sql } from 'kysely';
import t from 'tap';
import { unpackKeys } from '../../src/channels/announcer.js';
import { acquireListener } from '../../src/channels/lease.js';
import { RESULTS_CHANNEL } from '../../src/channels/names.js';
import { openDatabase } from '../../src/db/database.js';
import { DEFAULT_QUERY_TIMEOUT_MS } from '../../src/db/handle.js';
import { buildTestApp, listen } from '../helpers/app.js';
import { SERVER_URL } from '../helpers/database.js';
import { httpRequest } from '../helpers/http.js';
import { captureLogs } from '../helpers/logs.js';
import { databaseBehindRelay } from '../helpers/relay.js';
import { customer, insertRequest, postCallback, resultBody } from '../callbacks/fixtures.js';

/**
 * Short enough to keep the test quick, long enough that a healthy query on a loaded machine (CI at
 * load 20 on 2 cores) never times out: at 1 s, a starved announce or callback timed out on its own.
 */
const QUERY_TIMEOUT_MS = 4000;
/**
 * Shutdown destroys suspect sockets at once and the others after CLOSE_GRACE_MS (1 s); a half-open
 * connection left to end politely never ends at all. A bound that proves the point with room for load.
 */
const SHUTDOWN_BOUND_MS = 10_000;

/** A result that starts now, as the provider would send it for a request submitted just before. */
function freshResult(customerUuid: string) {
  const now = Date.now();
  return resultBody(customerUuid, { started: new Date(now).toISOString(), finished: new Date(now + 1000).toISOString() });
}

t.test('the query timeout is set without a startup parameter a pooler refuses', async (t) => {
  t.equal(DEFAULT_QUERY_TIMEOUT_MS, 15_000);
  if (!SERVER_URL) {
    // PGlite: one in-process engine, no connection to lose; the setting is carried for uniformity.
    const database = await openDatabase({ databaseUrl: undefined, dataDir: 'memory://' });
    t.teardown(() => database.close());
    t.equal(database.queryTimeoutMs, DEFAULT_QUERY_TIMEOUT_MS);
    return;
  }
  const { database } = await databaseBehindRelay(t);
  const session = await sql<{ statement_timeout: string }>`show statement_timeout`.execute(database.db);
  t.equal(session.rows[0]!.statement_timeout, '15s', 'session mode: SET after connecting');
  const transactionPooled = await openDatabase({ databaseUrl: database.connectionString, dataDir: 'unused', poolMode: 'transaction' });
  t.teardown(() => transactionPooled.close());
  const pooled = await sql<{ statement_timeout: string }>`show statement_timeout`.execute(transactionPooled.db);
  t.equal(pooled.rows[0]!.statement_timeout, '0', 'transaction mode: no session state at all');
});

/** Runs close, bounded by SHUTDOWN_BOUND_MS: whether it finished in time, and how long it took. */
async function closesWithin(close: () => Promise<void>): Promise<{ closed: boolean; closedIn: number }> {
  const started = performance.now();
  let bound: NodeJS.Timeout | undefined;
  const closed = await Promise.race([
    close().then(() => true),
    new Promise<false>((resolve) => (bound = setTimeout(() => resolve(false), SHUTDOWN_BOUND_MS))),
  ]);
  clearTimeout(bound);
  return { closed, closedIn: performance.now() - started };
}

if (SERVER_URL) {
  t.test('after the path to the database goes half-open, nothing keeps failing once it is back', { timeout: 60_000 }, async (t) => {
    const { database, relay } = await databaseBehindRelay(t, { queryTimeoutMs: QUERY_TIMEOUT_MS });
    const logs = captureLogs();
    const { app } = await buildTestApp(t, { database, logs });
    const base = await listen(app);
    const lease = acquireListener(database, RESULTS_CHANNEL, captureLogs().logger);
    t.teardown(() => lease.release());
    const { listener } = lease;
    if (!listener.listening) await once(listener, 'listening');

    const [warm, during, waiting, ...later] = ['warm', 'during', 'waiting', 'later1', 'later2', 'later3'].map(customer);
    for (const c of [warm!, during!, waiting!, ...later]) await insertRequest(database.db, { customerUuid: c, status: 'submitted' });
    // Several pooled connections and the NOTIFY connection are open (and idle) when the path goes dark.
    await Promise.all(Array.from({ length: 6 }, () => sql`select pg_sleep(0.05)`.execute(database.db)));
    const warmAnnounced = new Promise<void>((resolve) => {
      const heard = (payload: string) => {
        if (!unpackKeys(payload).includes(warm!)) return;
        listener.off('notification', heard);
        resolve();
      };
      listener.on('notification', heard);
    });
    t.equal((await postCallback(app, freshResult(warm!))).statusCode, 200);
    // Its announce goes out after the 200 (after the commit): on a loaded machine it could still be
    // on its way when the path goes dark, time out with it, and be logged as a failure after the
    // database is back (seen in CI). Heard, it is done.
    await warmAnnounced;

    const blocked = once(listener, 'waiting');
    const longPoll = httpRequest(`${base}/v1/underwritings/${waiting}?wait=30`);
    await blocked;

    relay.pause();
    const duringStart = performance.now();
    const down = await postCallback(app, freshResult(during!));
    t.equal(down.statusCode, 503, 'a callback while the database is silent is answered 503');
    t.ok(performance.now() - duringStart >= QUERY_TIMEOUT_MS - 50, 'after the query timeout: the pause outlasted it');

    relay.admitNew();
    const mark = logs.lines.length;
    const sent = performance.now();
    const up = await postCallback(app, freshResult(waiting!));
    const answeredIn = performance.now() - sent;
    t.equal(up.statusCode, 200, 'the first callback once the database is back is stored');
    t.ok(answeredIn < QUERY_TIMEOUT_MS, `promptly (${Math.round(answeredIn)} ms), not after a stale connection's ${QUERY_TIMEOUT_MS} ms timeout`);

    const polled = await longPoll;
    const wokenIn = performance.now() - sent - answeredIn;
    t.equal(polled.status, 200);
    t.match(polled.json, { customerUuid: waiting, status: 'completed' });
    t.ok(wokenIn < QUERY_TIMEOUT_MS, `the long-poll is woken ${Math.round(wokenIn)} ms after the callback's 200, not at its deadline`);

    for (const c of later) t.equal((await postCallback(app, freshResult(c))).statusCode, 200);
    const announced = logs.lines.slice(mark).filter((l) => l.includes('could not announce'));
    t.same(announced, [], 'no announce fails once the database is back');

    // Shutdown: the long-poll is done, the half-open sockets still sit in the pools and the relay.
    await lease.release();
    const { closed, closedIn } = await closesWithin(async () => {
      await app.close();
      await database.close();
    });
    t.ok(closed, `shutdown took ${Math.round(closedIn)} ms (bound ${SHUTDOWN_BOUND_MS} ms), not held up by half-open connections`);
  });

  t.test('a connection whose query timed out is destroyed, never handed out again', { timeout: 30_000 }, async (t) => {
    const { database, relay } = await databaseBehindRelay(t, { queryTimeoutMs: QUERY_TIMEOUT_MS, poolSize: 1 });
    const pid = async () => (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(database.db)).rows[0]!.pid;
    const first = await pid();
    t.equal(await pid(), first, 'one pooled connection, reused while healthy');
    relay.pause();
    await t.rejects(pid(), /Query read timeout/);
    relay.admitNew();
    const started = performance.now();
    const second = await pid();
    t.not(second, first, 'the next query runs on a new connection');
    t.ok(performance.now() - started < QUERY_TIMEOUT_MS, 'at once, not after another timeout');
  });
}
