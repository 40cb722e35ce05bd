import { once } from 'node:events';
import { sql } from 'kysely';
import type { Test } from 'tap';
import t from 'tap';
import { RESULTS_CHANNEL } from '../../src/channels/names.js';
import type { DatabaseHandle } from '../../src/db/handle.js';
import { openDatabase } from '../../src/db/database.js';
import { acquireListener } from '../../src/channels/lease.js';
import { type ChannelListener, DEFAULT_MAX_WAITERS } from '../../src/channels/listener.js';
import { buildTestApp, listen } from '../helpers/app.js';
import { anotherConnection, freshDatabase, freshDatabaseUrl, SERVER_URL } from '../helpers/database.js';
import { httpRequest } from '../helpers/http.js';
import { captureLogs } from '../helpers/logs.js';
import { migrateToLatest } from '../../src/db/migrator.js';
import { databaseBehindRelay, startRelay, throughRelay } from '../helpers/relay.js';
import { insertRequest, distinctResult, storeResult } from './fixtures.js';
import { until } from '../helpers/until.js';

// One database for the file (every test has its own customers): a fresh PGlite costs seconds.
const database = await freshDatabase(t);

// A broken wake-up would only answer after the full wait=30; these tests would then hit this limit
// (28 s, counted from before the test's setup: a slow host's setup took a good part of 20 s).
// A new object for each test: tap takes the options object over, so a shared one limits only the first.
const noFullWait = () => ({ timeout: 28_000 });

/** The process-wide listener the app's long-polls use (shared, so this is the very same one). */
function listenerOf(t: Test, database: DatabaseHandle): ChannelListener {
  const lease = acquireListener(database, RESULTS_CHANNEL, captureLogs().logger);
  t.teardown(() => lease.release());
  return lease.listener;
}

t.test('a long-poll is answered with the result a callback stores through another instance', noFullWait(), async (t) => {
  const first = await buildTestApp(t, { database });
  const second = await buildTestApp(t, { database: await anotherConnection(t, database) });
  await insertRequest(first.database.db, { customerUuid: 'waiting-1' });
  const base = await listen(first.app);
  const listener = listenerOf(t, first.database);

  const blocked = once(listener, 'waiting');
  const answer = httpRequest(`${base}/v1/underwritings/waiting-1?wait=30`);
  await blocked;

  const body = distinctResult('waiting-1', { limit: 1234 });
  const delivered = await second.app.inject({ method: 'POST', url: '/v1/callbacks/underwriting', payload: body });
  t.equal(delivered.statusCode, 200);
  t.same(delivered.json(), { received: true });

  const res = await answer;
  t.equal(res.status, 200);
  t.match(res.json, { customerUuid: 'waiting-1', status: 'completed', decision: 'approved' });
  t.same(res.json.result, body);
  t.equal(listener.waiterCount, 0, 'the waiter is gone');
});

t.test('one commit of many results wakes every waiter on another instance, from a few notifications', noFullWait(), async (t) => {
  const first = await buildTestApp(t, { database });
  const second = await buildTestApp(t, { database: await anotherConnection(t, database) });
  // Long keys, so that one commit's keys fill more than one payload (PostgreSQL's limit is 8000 bytes).
  const customers = Array.from({ length: 120 }, (_, i) => `packed-${String(i).padStart(3, '0')}-${'k'.repeat(110)}`);
  for (const customerUuid of customers) await insertRequest(first.database.db, { customerUuid });
  const listener = listenerOf(t, first.database);
  if (!listener.listening) await once(listener, 'listening');
  const payloads: string[] = [];
  const keysHeard = new Set<string>();
  let allHeard = () => {};
  const everyKeyHeard = new Promise<void>((resolve) => (allHeard = resolve));
  const heard = (payload: string) => {
    payloads.push(payload);
    for (const key of payload.split('\n')) keysHeard.add(key);
    if (customers.every((c) => keysHeard.has(c))) allHeard();
  };
  let blocked = 0;
  let allWaiting = () => {};
  const allBlocked = new Promise<void>((resolve) => (allWaiting = resolve));
  const waiting = () => {
    if (++blocked === customers.length) allWaiting();
  };
  listener.on('notification', heard).on('waiting', waiting);
  t.teardown(() => listener.off('notification', heard).off('waiting', waiting));
  const answers = customers.map((c) => first.app.inject({ method: 'GET', url: `/v1/underwritings/${c}?wait=30` }));
  await allBlocked;

  const stored = await Promise.all(customers.map((c) => second.app.inject({ method: 'POST', url: '/v1/callbacks/underwriting', payload: distinctResult(c) })));
  t.same(new Set(stored.map((r) => r.statusCode)), new Set([200]));
  const results = await Promise.all(answers);
  t.same(new Set(results.map((r) => r.json().status)), new Set(['completed']), 'every waiter answered with its result');
  // On PGlite the "other instance" is this process, which wakes its waiters before its NOTIFY is heard.
  await everyKeyHeard;

  t.ok(payloads.length < customers.length, `${payloads.length} notifications for ${customers.length} results`);
  t.ok(payloads.some((p) => p.includes('\n')), 'a notification carries several keys');
  t.ok(payloads.every((p) => Buffer.byteLength(p) < 8000), 'each payload below the limit');
  t.same(new Set(payloads.flatMap((p) => p.split('\n'))), new Set(customers), 'every key announced');
});

t.test('a long-poll that waited out its time answers with the pending state', async (t) => {
  const { app } = await buildTestApp(t, { database });
  await insertRequest(database.db, { customerUuid: 'slow-1' });
  const res = await app.inject({ method: 'GET', url: '/v1/underwritings/slow-1?wait=1' });
  t.equal(res.statusCode, 200);
  t.match(res.json(), { customerUuid: 'slow-1', status: 'submitted', decision: null, result: null, completedAt: null });
});

t.test('a long-poll for a request that already has its result answers at once', noFullWait(), async (t) => {
  const { app } = await buildTestApp(t, { database });
  const body = distinctResult('done-1');
  await insertRequest(database.db, { customerUuid: 'done-1', result: body });
  const listener = listenerOf(t, database);
  let registered = 0;
  listener.on('waiting', () => (registered += 1));
  const res = await app.inject({ method: 'GET', url: '/v1/underwritings/done-1?wait=30' });
  t.equal(res.statusCode, 200);
  t.same(res.json().result, body);
  t.equal(registered, 0, 'it never blocked');
});

t.test('a long-poll for an unknown customer is 404 at once', noFullWait(), async (t) => {
  const { app } = await buildTestApp(t, { database });
  const res = await app.inject({ method: 'GET', url: '/v1/underwritings/nobody?wait=30' });
  t.equal(res.statusCode, 404);
  t.equal(res.json().error, 'not_found');
});

t.test('a wait outside 0-30 whole seconds is 400', async (t) => {
  const { app } = await buildTestApp(t, { database });
  await insertRequest(database.db, { customerUuid: 'c-1' });
  for (const wait of ['31', '-1', 'x', '1.5', '', '1e1', '100000000']) {
    const res = await app.inject({ method: 'GET', url: `/v1/underwritings/c-1?wait=${wait}` });
    t.equal(res.statusCode, 400, `wait=${wait}`);
    t.equal(res.json().error, 'validation_failed');
    t.equal(res.json().issues[0].path, 'wait');
  }
  t.equal((await app.inject({ method: 'GET', url: '/v1/underwritings/c-1?wait=0' })).statusCode, 200);
});

t.test('closing the app answers waiting long-polls with the current state', noFullWait(), async (t) => {
  const { app } = await buildTestApp(t, { database });
  await insertRequest(database.db, { customerUuid: 'closing-1' });
  await insertRequest(database.db, { customerUuid: 'closing-2' });
  const base = await listen(app);
  const listener = listenerOf(t, database);

  let blocked = 0;
  const bothBlocked = new Promise<void>((resolve) =>
    listener.on('waiting', () => {
      if (++blocked === 2) resolve();
    }),
  );
  const answers = [
    httpRequest(`${base}/v1/underwritings/closing-1?wait=30`),
    app.inject({ method: 'GET', url: '/v1/underwritings/closing-2?wait=30' }),
  ] as const;
  await bothBlocked;
  await app.close();

  const [http, injected] = [await answers[0], await answers[1]];
  t.equal(http.status, 200);
  t.match(http.json, { customerUuid: 'closing-1', status: 'submitted', result: null });
  t.equal(injected.statusCode, 200);
  t.match(injected.json(), { customerUuid: 'closing-2', status: 'submitted', result: null });
});

t.test('past the waiter bound a long-poll is refused 503 too_many_waiters, not queued', noFullWait(), async (t) => {
  const { app } = await buildTestApp(t, { database });
  await insertRequest(database.db, { customerUuid: 'bound-1' });
  await insertRequest(database.db, { customerUuid: 'bound-2' });
  await insertRequest(database.db, { customerUuid: 'bound-3', result: distinctResult('bound-3') });
  await app.ready();
  const listener = listenerOf(t, database);
  listener.maxWaiters = 1;

  const blocked = once(listener, 'waiting');
  const holding = app.inject({ method: 'GET', url: '/v1/underwritings/bound-1?wait=30' });
  await blocked;

  const metrics = await app.inject({ method: 'GET', url: '/metrics' });
  t.match(metrics.body, /underwriting_longpoll_waiters 1\b/);

  const refused = await app.inject({ method: 'GET', url: '/v1/underwritings/bound-2?wait=30' });
  t.equal(refused.statusCode, 503);
  t.same(refused.json(), {
    error: 'too_many_waiters',
    message: 'too many long-polls are waiting on this instance; retry shortly or poll without wait',
  });
  const answered = await app.inject({ method: 'GET', url: '/v1/underwritings/bound-3?wait=30' });
  t.equal(answered.statusCode, 200, 'a result already there is still given');
  t.equal((await app.inject({ method: 'GET', url: '/v1/underwritings/bound-2' })).statusCode, 200, 'plain reads still work');

  await storeResult(database.db, (await database.db.selectFrom('underwriting_requests').select('id').where('customer_uuid', '=', 'bound-1').executeTakeFirstOrThrow()).id, distinctResult('bound-1'));
  t.equal((await holding).statusCode, 200);
  const after = await app.inject({ method: 'GET', url: '/metrics' });
  t.match(after.body, /underwriting_longpoll_waiters 0\b/);
});

t.test("the event feed's long-polls wait through the same mechanism, under a waiter bound of their own", noFullWait(), async (t) => {
  const { app } = await buildTestApp(t, { database });
  await insertRequest(database.db, { customerUuid: 'shared-1' });
  await app.ready();
  const listener = listenerOf(t, database);
  listener.maxWaiters = 1;
  t.teardown(() => {
    listener.maxWaiters = DEFAULT_MAX_WAITERS;
  });

  const blocked = once(listener, 'waiting');
  const feed = app.inject({ method: 'GET', url: '/v1/events?customerUuid=shared-nobody&wait=30' });
  t.equal((await blocked)[0], undefined, 'the feed waits for anything new, under no key');
  t.match((await app.inject({ method: 'GET', url: '/metrics' })).body, /underwriting_event_feed_waiters 1\b/);

  const tooMany = { error: 'too_many_waiters', message: 'too many long-polls are waiting on this instance; retry shortly or poll without wait' };
  // Each kind has its own bound (as before the feed shared this mechanism): a feed waiter takes none of the customers'.
  // The customer's own 'waiting' (the feed's waiter, woken by another commit, says 'waiting' again
  // under no key meanwhile), or the answer, had it been refused instead of waiting.
  const customerWaits = new Promise<string | undefined>((resolve) => {
    const on = (key: string | undefined) => {
      if (key !== 'shared-1') return;
      listener.off('waiting', on);
      resolve(key);
    };
    listener.on('waiting', on);
  });
  const customer = app.inject({ method: 'GET', url: '/v1/underwritings/shared-1?wait=30' });
  const waited = await Promise.race([customerWaits, customer.then((res) => `answered ${res.statusCode} without waiting`)]);
  t.equal(waited, 'shared-1', 'a customer long-poll still waits: the feed holds none of its bound');
  const another = await app.inject({ method: 'GET', url: '/v1/events?customerUuid=shared-nobody&wait=30' });
  t.equal(another.statusCode, 503, 'and so does a second feed long-poll');
  t.same(another.json(), tooMany);

  await app.close();
  const answered = await feed;
  t.equal(answered.statusCode, 200, 'closing answers the waiting feed with what is stored');
  t.same(answered.json().items, []);
  t.equal((await customer).statusCode, 200, 'and the waiting customer long-poll');
});

t.test('a long-poll whose client goes away frees its waiter at once, not at its deadline', noFullWait(), async (t) => {
  const { app } = await buildTestApp(t, { database });
  await insertRequest(database.db, { customerUuid: 'gone-1' });
  await insertRequest(database.db, { customerUuid: 'gone-2' });
  const base = await listen(app);
  const listener = listenerOf(t, database);
  listener.maxWaiters = 1;
  t.teardown(() => {
    listener.maxWaiters = DEFAULT_MAX_WAITERS;
  });

  const blocked = once(listener, 'waiting');
  const client = new AbortController();
  const abandoned = httpRequest(`${base}/v1/underwritings/gone-1?wait=30`, { signal: client.signal }).catch(() => 'aborted');
  await blocked;
  client.abort();
  t.equal(await abandoned, 'aborted');
  // Nothing to await but the count: the waiter was kept for nobody until its 30 s had passed.
  await until(() => listener.waiterCount === 0, 5_000, 'the abandoned waiter freed');
  t.match((await app.inject({ method: 'GET', url: '/metrics' })).body, /underwriting_longpoll_waiters 0\b/);

  const next = once(listener, 'waiting');
  const waiting = app.inject({ method: 'GET', url: '/v1/underwritings/gone-2?wait=30' });
  const waited = await Promise.race([next.then(() => 'waiting'), waiting.then((res) => `answered ${res.statusCode}`)]);
  t.equal(waited, 'waiting', 'the next long-poll takes the freed place instead of 503 too_many_waiters');
  await storeResult(database.db, (await database.db.selectFrom('underwriting_requests').select('id').where('customer_uuid', '=', 'gone-2').executeTakeFirstOrThrow()).id, distinctResult('gone-2'));
  t.equal((await waiting).statusCode, 200);
});

t.test("an event feed long-poll whose client goes away frees its waiter at once", noFullWait(), async (t) => {
  const { app } = await buildTestApp(t, { database });
  const base = await listen(app);
  const listener = listenerOf(t, database);

  const blocked = once(listener, 'waiting');
  const client = new AbortController();
  const abandoned = httpRequest(`${base}/v1/events?customerUuid=gone-nobody&wait=30`, { signal: client.signal }).catch(() => 'aborted');
  await blocked;
  client.abort();
  t.equal(await abandoned, 'aborted');
  await until(() => listener.waiterCount === 0, 5_000, 'the abandoned feed waiter freed');
  t.match((await app.inject({ method: 'GET', url: '/metrics' })).body, /underwriting_event_feed_waiters 0\b/);
});

t.test('a result stored between two reads of a waiter is not missed', noFullWait(), async (t) => {
  const { app } = await buildTestApp(t, { database });
  const ids = [];
  for (let i = 0; i < 20; i++) ids.push(await insertRequest(database.db, { customerUuid: `race-${i}` }));
  await app.ready();
  // Results land while the long-polls are registering and reading, in every possible interleaving.
  const answers = ids.map((_, i) => app.inject({ method: 'GET', url: `/v1/underwritings/race-${i}?wait=30` }));
  await Promise.all(ids.map((id, i) => storeResult(database.db, id, distinctResult(`race-${i}`))));
  const results = await Promise.all(answers);
  t.same(
    results.map((r) => r.json().status),
    ids.map(() => 'completed'),
  );
});

if (SERVER_URL) {
  t.test("a long-poll is answered by its own instance's callback without waiting for the NOTIFY", noFullWait(), async (t) => {
    // Only the LISTEN connection goes through the relay: once it goes dark, no notification can
    // arrive (the waiter would answer at its deadline, or at the listener's heartbeat in 30 s).
    const url = await freshDatabaseUrl(t);
    const relay = await startRelay(new URL(url).hostname, Number(new URL(url).port || 5432));
    t.teardown(() => relay.close());
    const own = await openDatabase({ databaseUrl: url, listenUrl: throughRelay(url, relay), dataDir: 'unused' });
    t.teardown(() => own.close());
    await migrateToLatest(own);
    const { app } = await buildTestApp(t, { database: own });
    const base = await listen(app);
    const listener = listenerOf(t, own);
    if (!listener.listening) await once(listener, 'listening');
    await insertRequest(own.db, { customerUuid: 'own-1' });

    const blocked = once(listener, 'waiting');
    const answer = httpRequest(`${base}/v1/underwritings/own-1?wait=30`);
    await blocked;
    relay.pause();

    const delivered = await app.inject({ method: 'POST', url: '/v1/callbacks/underwriting', payload: distinctResult('own-1') });
    t.equal(delivered.statusCode, 200);
    const res = await answer;
    t.equal(res.status, 200);
    t.match(res.json, { customerUuid: 'own-1', status: 'completed' });
  });

  t.test('after a database outage the listener reconnects by itself and a notification still wakes a waiter', noFullWait(), async (t) => {
    const { database: relayed, relay, url } = await databaseBehindRelay(t);
    const direct = await openDatabase({ databaseUrl: url, dataDir: 'unused' });
    t.teardown(() => direct.close());

    const { app, logs } = await buildTestApp(t, { database: relayed });
    const base = await listen(app);
    const listener = listenerOf(t, relayed);
    if (!listener.listening) await once(listener, 'listening');
    const requestId = await insertRequest(direct.db, { customerUuid: 'outage-1' });

    let blocked = once(listener, 'waiting');
    const answer = httpRequest(`${base}/v1/underwritings/outage-1?wait=30`);
    await blocked;

    const lost = once(listener, 'lost');
    relay.cut();
    await lost;
    t.notOk(listener.listening);

    const back = once(listener, 'listening');
    blocked = once(listener, 'waiting');
    relay.restore();
    await back;
    // Woken by the reconnect, the waiter re-read (still pending) and waits again.
    await blocked;
    t.ok(logs.entries().some((e) => e.msg === 'notification listener lost its connection; reconnecting'));

    await storeResult(direct.db, requestId, distinctResult('outage-1'));
    const res = await answer;
    t.equal(res.status, 200);
    t.match(res.json, { customerUuid: 'outage-1', status: 'completed', result: { customerUuid: 'outage-1' } });
  });

  t.test('one listener connection serves many waiters and apps in a process', noFullWait(), async (t) => {
    const database = await freshDatabase(t);
    const first = await buildTestApp(t, { database });
    const second = await buildTestApp(t, { database });
    await Promise.all([first.app.ready(), second.app.ready()]);
    for (let i = 0; i < 5; i++) await insertRequest(database.db, { customerUuid: `many-${i}` });
    const listener = listenerOf(t, database);
    if (!listener.listening) await once(listener, 'listening');

    let blocked = 0;
    const allBlocked = new Promise<void>((resolve) =>
      listener.on('waiting', () => {
        if (++blocked === 10) resolve();
      }),
    );
    const answers = [first, second].flatMap(({ app }) =>
      [0, 1, 2, 3, 4].map((i) => app.inject({ method: 'GET', url: `/v1/underwritings/many-${i}?wait=30` })),
    );
    await allBlocked;
    const { rows } = await sql<{ n: number }>`
      select count(*)::int as n from pg_stat_activity
      where application_name = 'underwriting-gateway-listener' and datname = current_database()`.execute(database.db);
    t.equal(rows[0]?.n, 1, 'a single LISTEN connection');
    const ids = await database.db.selectFrom('underwriting_requests').select(['id', 'customer_uuid']).execute();
    for (const { id, customer_uuid } of ids) await storeResult(database.db, id, distinctResult(customer_uuid));
    const results = await Promise.all(answers);
    t.same(new Set(results.map((r) => r.json().status)), new Set(['completed']));
  });
}
