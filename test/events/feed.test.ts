import { sql } from 'kysely';
import pg from 'pg';
import { type FeedPosition, readFeed } from '../../src/events/feed-sql.js';
import { recordResults } from '../../src/requests/complete.js';
import t, { type Test } from 'tap';
import { buildTestApp, listen } from '../helpers/app.js';
import { anotherConnection, freshDatabase, SERVER_URL } from '../helpers/database.js';
import { httpRequest } from '../helpers/http.js';
import { customer, insertRequest, postCallback, resultBody, startedPlus } from '../callbacks/fixtures.js';
import { getJson, pushEnv, webhookSecret } from './fixtures.js';
import { until } from '../helpers/until.js';
import { RESULTS_CHANNEL } from '../../src/channels/names.js';
import { startReceiver } from './receiver.js';

const shared = await freshDatabase(t);

async function gateway(t: Test, env: Record<string, string> = {}) {
  const built = await buildTestApp(t, { database: shared, env });
  await built.app.ready();
  return built;
}

/** Every event of the feed from `after` on, page by page. */
async function readAll(app: Awaited<ReturnType<typeof gateway>>['app'], query: string, after?: string) {
  const ids: string[] = [];
  let cursor = after;
  for (;;) {
    const page = await getJson(app, `/v1/events?limit=7&${query}${cursor ? `&after=${cursor}` : ''}`);
    if (page.status !== 200) throw new Error(page.text);
    ids.push(...page.body.items.map((e: { id: string }) => e.id));
    if (page.body.items.length === 0) return { ids, cursor };
    cursor = page.body.nextCursor;
  }
}

t.test('the feed pages oldest first with filters, and a cursor continues where the page ended', async (t) => {
  const { app } = await gateway(t);
  const [a, b] = [customer('feed-a'), customer('feed-b')];
  await insertRequest(shared.db, { customerUuid: a, status: 'submitted' });
  for (const [i, c] of [a, b, a, b].entries()) await postCallback(app, resultBody(c, { started: startedPlus(i) }));

  const ofA = await getJson(app, `/v1/events?customerUuid=${a}`);
  t.equal(ofA.status, 200);
  t.same(ofA.body.items.map((e: any) => e.type), ['underwriting.completed', 'callback.unmatched']);
  t.same(ofA.body.items[0].deliveries, [], 'no URL configured: no deliveries');
  const first = await getJson(app, `/v1/events?customerUuid=${b}&limit=1`);
  t.same(first.body.items.map((e: any) => e.type), ['callback.unmatched']);
  const rest = await getJson(app, `/v1/events?customerUuid=${b}&after=${first.body.nextCursor}`);
  t.equal(rest.body.items.length, 1);
  t.not(rest.body.items[0].id, first.body.items[0].id);
  const end = await getJson(app, `/v1/events?customerUuid=${b}&after=${rest.body.nextCursor}`);
  t.same(end.body, { items: [], nextCursor: rest.body.nextCursor }, 'past the end: nothing, and the same cursor');
  const typed = await getJson(app, `/v1/events?customerUuid=${a}&type=callback.unmatched`);
  t.same(typed.body.items.map((e: any) => e.type), ['callback.unmatched']);

  t.equal((await getJson(app, '/v1/events?after=garbage!')).status, 400);
  t.equal((await getJson(app, `/v1/events?after=${Buffer.from('1.x').toString('base64url')}`)).status, 400);
  t.equal((await getJson(app, '/v1/events?type=nope')).status, 400);
  t.equal((await getJson(app, '/v1/events?limit=501')).status, 400);
  t.equal((await getJson(app, '/v1/events?wait=31')).status, 400);
  t.equal((await getJson(app, '/v1/events?other=1')).status, 400, 'unknown parameters are refused');
  t.equal((await getJson(app, '/v1/events/evt_00000000000000000000000000000000')).status, 404);
  t.match((await getJson(app, '/v1/events/nope')).body, { error: 'validation_failed' });
});

t.test('the event routes have the query routes\' allowlist and keys', async (t) => {
  const key = 'k'.repeat(20);
  const { app } = await gateway(t, { QUERY_API_KEYS: key });
  t.equal((await getJson(app, '/v1/events')).status, 401);
  t.equal((await getJson(app, '/v1/events', { authorization: `Bearer ${key}` })).status, 200);
  const closed = await gateway(t, { QUERY_ALLOWED_IPS: '10.0.0.1/32' });
  t.equal((await getJson(closed.app, '/v1/events')).status, 403);
  t.equal((await closed.app.inject({ method: 'POST', url: '/v1/events/redeliver', payload: { status: 'dead' } })).statusCode, 403);
});

t.test('paging while callbacks commit concurrently sees every event exactly once', async (t) => {
  const { app } = await gateway(t);
  const other = await buildTestApp(t, { database: await anotherConnection(t, shared) });
  const tag = customer('burst').slice(-8);
  const customers = Array.from({ length: 150 }, (_, i) => `burst-${tag}-${i}`);
  // Start after everything earlier tests wrote, before the burst begins.
  let { cursor } = await readAll(app, '');
  const seen: string[] = [];
  let done = false;
  const writing = (async () => {
    await Promise.all(customers.map((c, i) => postCallback(i % 2 ? app : other.app, resultBody(c))));
    done = true;
  })();
  for (;;) {
    const finished = done;
    const { ids, cursor: next } = await readAll(app, '', cursor);
    seen.push(...ids);
    cursor = next;
    if (finished && ids.length === 0) break;
    // A reader that never pauses would keep PGlite's single connection from the writers.
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  await writing;
  const ours = await shared.db.selectFrom('events').select('public_id').where('customer_uuid', 'in', customers).execute();
  t.equal(ours.length, 150);
  t.equal(new Set(seen).size, seen.length, 'no duplicates');
  t.same(new Set(seen), new Set(ours.map((e) => e.public_id)), 'no gaps');
});

if (SERVER_URL) {
  t.test('a reader paging as fast as it can while eight writers commit 2,000 events sees each exactly once', async (t) => {
    const writers = await anotherConnection(t, shared);
    const tag = customer('race').slice(-8);
    const { rows } = await sql<{ tx: string; id: number }>`select coalesce(max(tx_id)::text, '0') as tx, coalesce(max(id), 0)::int as id from events`.execute(shared.db);
    let after: FeedPosition | undefined = { tx: rows[0]!.tx, id: rows[0]!.id };
    const n = 2000;
    let done = false;
    const writing = Promise.all(
      Array.from({ length: 8 }, async (_, w) => {
        for (let i = w; i < n; i += 8) {
          const body = resultBody(`race-${tag}-${i}`);
          const json = JSON.stringify(body);
          await recordResults(writers.db, [{ receivedAt: new Date(), peer: null, rawBody: Buffer.from(json), customerUuid: body.customerUuid, started: body.started, finished: body.finished, body: json, decision: 'approved' }], { skewS: 300 });
        }
      }),
    ).then(() => (done = true));
    const seen = new Map<number, number>();
    for (;;) {
      const finished = done;
      const page = await readFeed(shared.db, {}, after, 7);
      for (const e of page) seen.set(e.id, (seen.get(e.id) ?? 0) + 1);
      if (page.length > 0) after = { tx: page.at(-1)!.tx_id, id: page.at(-1)!.id };
      if (finished && page.length === 0) break;
    }
    await writing;
    const ours = await shared.db.selectFrom('events').select('id').where('customer_uuid', 'like', `race-${tag}-%`).execute();
    t.equal(ours.length, n);
    t.same(ours.filter((e) => seen.get(e.id) !== 1), [], 'every event read once: no gap, no duplicate');
  });

  t.test('an event committed late by a transaction that began early is not skipped by a reader already past it', async (t) => {
    const { app } = await gateway(t);
    const tail = await readAll(app, '');
    const connect = async () => {
      const client = new pg.Client({ connectionString: (shared as { url?: string }).url });
      await client.connect();
      t.teardown(() => client.end());
      return client;
    };
    const [early, late] = [await connect(), await connect()];
    const insert = (client: pg.Client, c: string) =>
      client.query(
        `insert into events (public_id, type, customer_uuid, created_at, data)
         values ('evt_' || replace(gen_random_uuid()::text, '-', ''), 'callback.unmatched', $1, now(),
                 jsonb_build_object('customerUuid', $1::text, 'receivedAt', '2026-11-22T03:00:00.000Z', 'result', null))
         returning public_id`,
        [c],
      );
    await early.query('begin');
    const first = await insert(early, customer('early')); // its transaction id is the older one
    await late.query('begin');
    const second = await insert(late, customer('late'));
    await late.query('commit');

    const before = await readAll(app, '', tail.cursor);
    t.same(before.ids, [], 'the later commit waits while an older transaction may still add events before it');
    await early.query('commit');
    const after = await readAll(app, '', before.cursor ?? tail.cursor);
    t.same(after.ids, [first.rows[0].public_id, second.rows[0].public_id], 'both, in transaction order');
  });

  t.test('a long-poll on one instance is answered when a callback is stored on another', async (t) => {
    const { app } = await gateway(t);
    const base = await listen(app);
    const other = await buildTestApp(t, { database: await anotherConnection(t, shared) });
    const cust = customer('wake');
    const { cursor } = await readAll(app, `customerUuid=${cust}`);
    const asked = Date.now();
    const polling = httpRequest(`${base}/v1/events?customerUuid=${cust}&wait=20${cursor ? `&after=${cursor}` : ''}`, { method: 'GET' });
    // The change comes only once the poll is waiting, so that only a wake can answer it early.
    await until(async () => (/underwriting_event_feed_waiters 1/.test((await app.inject({ method: 'GET', url: '/metrics' })).body) ? true : undefined));
    t.equal((await postCallback(other.app, resultBody(cust))).statusCode, 200);
    const res = await polling;
    t.equal(res.status, 200);
    const body = res.json;
    t.same(body.items.map((e: any) => e.type), ['callback.unmatched']);
    t.ok(Date.now() - asked < 10_000, `answered after ${Date.now() - asked} ms, well before the deadline`);
  });
}

t.test('redelivery: one event again to every URL, and every dead delivery in bulk', async (t) => {
  let failing = true;
  const receiver = await startReceiver(t, () => (failing ? 500 : 200));
  const { app } = await gateway(t, pushEnv([receiver.url], webhookSecret(), { EVENT_RETRY_HORIZON_S: '1' }));
  const [a, b] = [customer('redo-a'), customer('redo-b')];
  await postCallback(app, resultBody(a));
  await postCallback(app, resultBody(b));
  const events = await until(async () => {
    const page = await getJson(app, `/v1/events?customerUuid=${a}`);
    const pageB = await getJson(app, `/v1/events?customerUuid=${b}`);
    const all = [...page.body.items, ...pageB.body.items];
    return all.length === 2 && all.every((e: any) => e.deliveries[0]?.status === 'dead') ? all : undefined;
  });
  failing = false;
  const before = receiver.received.length;
  const since = new Date(Date.parse(events[0].timestamp) - 1000).toISOString();
  const bulk = await app.inject({ method: 'POST', url: '/v1/events/redeliver', payload: { status: 'dead', since } });
  t.equal(bulk.statusCode, 202);
  t.same(bulk.json(), { queued: 2 });
  const redelivered = await receiver.count(before + 2);
  t.same(new Set(redelivered.slice(before).map((r) => r.json.id)), new Set(events.map((e: any) => e.id)));
  const none = await app.inject({ method: 'POST', url: '/v1/events/redeliver', payload: { status: 'dead', since } });
  t.same(none.json(), { queued: 0 }, 'nothing is dead any more');
  t.equal((await app.inject({ method: 'POST', url: '/v1/events/redeliver', payload: { status: 'pending' } })).statusCode, 400);

  const id = events[0].id as string;
  await until(async () => ((await getJson(app, `/v1/events/${id}`)).body.deliveries[0].status === 'delivered' ? true : undefined));
  const one = await app.inject({ method: 'POST', url: `/v1/events/${id}/redeliver` });
  t.equal(one.statusCode, 202);
  t.same(one.json(), { queued: 1 });
  const again = await receiver.count(before + 3);
  t.equal(again.at(-1)!.json.id, id, 'a delivered event is sent again, under the same webhook-id');
  t.equal((await app.inject({ method: 'POST', url: '/v1/events/evt_00000000000000000000000000000000/redeliver' })).statusCode, 404);
});

t.test('an event id begins with the milliseconds it was made in, so that new ids grow at the right edge of their index', async (t) => {
  const { app } = await gateway(t);
  const c = customer('id-order');
  const ids: string[] = [];
  const before = Date.now();
  for (let i = 0; i < 3; i++) {
    await postCallback(app, resultBody(c, { started: startedPlus(i) }));
    const page = await getJson(app, `/v1/events?customerUuid=${c}`);
    ids.push(page.body.items.at(-1).id);
  }
  const after = Date.now();
  t.equal(new Set(ids).size, 3, 'each id its own');
  for (const id of ids) {
    t.match(id, /^evt_[0-9a-f]{32}$/);
    const made = Number.parseInt(id.slice(4, 16), 16);
    // The database's clock and the test's are the same host's; 1 s of slack for rounding and skew.
    t.ok(made >= before - 1000 && made <= after + 1000, `${id} made within the test (${made} in ${before}..${after})`);
  }
  t.same([...ids].sort(), ids, 'ids made later sort after earlier ones');
});

// Every commit wakes every waiting feed long-poll, and one whose filter matches nothing new reads
// again each time: a few hundred of them (2,000 are allowed) under a steady flow of callbacks kept
// every pooled connection busy, so that the callbacks themselves and every other read queued
// behind the feed (field probe: 1,000 waiters and 20 callbacks/s took a list from 15 ms to 0.8 s and
// callbacks to 0.3 s; on PGlite 300 waiters held a callback for 30 s). Feed reads are now bounded
// per instance (FEED_READS_IN_FLIGHT); the others queue in the process. Shown with the events table
// locked, so that every feed read that reaches the database stays there: the pool keeps connections
// for the rest.
/** src/events/feed.ts's FEED_READS_IN_FLIGHT, written out: the test must run (and fail) without it. */
const FEED_READS_IN_FLIGHT = 2;

/**
 * Locks the events table in a transaction of its own, so that every feed read that reaches the
 * database stays there until release(); blocked() counts them.
 */
async function lockEvents(t: Test, database: { url?: string }) {
  const locker = new pg.Client({ connectionString: database.url });
  await locker.connect();
  t.teardown(() => locker.end()); // a lock still held then goes with its connection
  await locker.query('begin');
  await locker.query('lock table events in access exclusive mode');
  return {
    /** Feed reads (a page or a held-back check: `select "e"."id"…`) waiting for the lock; a /metrics scrape's read of events waits too, and is not counted. */
    async blocked() {
      // Inside a transaction pg_stat_activity is read once and kept: read it afresh.
      await locker.query('select pg_stat_clear_snapshot()');
      const { rows } = await locker.query<{ n: number }>(
        `select count(*)::int as n from pg_locks l join pg_stat_activity a on a.pid = l.pid
          where l.relation = 'events'::regclass and not l.granted and a.query like 'select "e"."id"%'`,
      );
      return rows[0]!.n;
    },
    /** Commits, first storing an event for customerUuid (and waking every waiter, as a commit does) when one is given. */
    async release(customerUuid?: string) {
      if (customerUuid !== undefined) {
        await locker.query(
          `insert into events (public_id, type, customer_uuid, created_at, data)
           values ('evt_' || replace(gen_random_uuid()::text, '-', ''), 'callback.unmatched', $1, now(),
                   jsonb_build_object('customerUuid', $1::text, 'receivedAt', '2026-11-22T03:00:00.000Z', 'result', null))`,
          [customerUuid],
        );
        await locker.query('select pg_notify($1, $2)', [RESULTS_CHANNEL, customerUuid]);
      }
      await locker.query('commit');
    },
  };
}

/**
 * A gauge of the app's /metrics, with its labels as written there (`name{read="again"}`). While
 * lockEvents holds its lock, a scrape takes its cluster gauges' 1 s bound (their read waits for the
 * lock too): the tests below scrape only where the figure must be seen.
 */
async function gauge(app: Awaited<ReturnType<typeof gateway>>['app'], series: string): Promise<number> {
  const body = (await app.inject({ method: 'GET', url: '/metrics' })).body;
  const line = body.split('\n').find((l) => l.startsWith(`${series} `));
  if (line === undefined) throw new Error(`no ${series} in /metrics`);
  return Number(line.slice(series.length + 1));
}

if (SERVER_URL) t.test('waiting feed long-polls never take more than their share of the pool: other reads still answer', async (t) => {
  const database = await freshDatabase(t);
  const { app } = await buildTestApp(t, { database });
  await app.ready();
  t.ok((database.poolStats()?.max ?? 0) > FEED_READS_IN_FLIGHT + 1, 'the pool is larger than the bound');
  const events = await lockEvents(t, database);

  const polls = Array.from({ length: 30 }, () => app.inject({ method: 'GET', url: '/v1/events?customerUuid=nobody&wait=1' }));
  await until(async () => (await events.blocked()) >= FEED_READS_IN_FLIGHT, 10_000, 'feed reads blocked on the events table');

  // A read of another table needs a connection of its own, while the feed's are all held.
  const list = app.inject({ method: 'GET', url: '/v1/underwritings?limit=1' }).then((res) => res.statusCode);
  let bound: NodeJS.Timeout | undefined;
  const answered = await Promise.race([list, new Promise<'still waiting'>((resolve) => (bound = setTimeout(() => resolve('still waiting'), 10_000)))]);
  clearTimeout(bound);
  t.equal(answered, 200, 'the list answers while the feed long-polls wait on the database');
  t.equal(await events.blocked(), FEED_READS_IN_FLIGHT, 'only the bound of feed reads is in the database');

  await events.release();
  for (const res of await Promise.all(polls)) t.equal(res.statusCode, 200);
  await list;
});

// A page a client asks for queued in one line with the re-reads of every waiting long-poll that a
// commit woke: with many waiters, it was read after all of them. A request's first read now goes
// ahead of reads again (src/events/read-limiter.ts; test/events/read-limiter.test.ts has the rule).
if (SERVER_URL) t.test('a page a client asks for is read before the re-reads of waiting long-polls that a commit woke', async (t) => {
  const database = await freshDatabase(t);
  const { app } = await buildTestApp(t, { database });
  await app.ready();
  const quiet = customer('quiet');
  const n = 24;
  const answered: string[] = [];
  const polls = Array.from({ length: n }, () =>
    app.inject({ method: 'GET', url: `/v1/events?customerUuid=${quiet}&wait=30` }).then((res) => (answered.push('long-poll'), res)),
  );
  await until(async () => (await gauge(app, 'underwriting_event_feed_waiters')) === n, 10_000, `${n} long-polls waiting`);

  const events = await lockEvents(t, database);
  // A commit of another customer's change wakes every waiter: two re-reads reach the database, the rest queue.
  await sql`select pg_notify(${RESULTS_CHANNEL}, 'someone-else')`.execute(database.db);
  await until(async () => (await events.blocked()) === FEED_READS_IN_FLIGHT, 10_000, 'two re-reads held in the database');
  // (A waiter that read less than 50 ms before the wake reads again only then: MIN_REREAD_MS.)
  await until(async () => (await gauge(app, 'underwriting_event_feed_reads_queued{read="again"}')) === n - FEED_READS_IN_FLIGHT, 10_000, 'the others queued');
  const page = app.inject({ method: 'GET', url: `/v1/events?customerUuid=${quiet}` }).then((res) => (answered.push('page'), res));
  await until(async () => (await gauge(app, 'underwriting_event_feed_reads_queued{read="first"}')) === 1, 10_000, 'the page queued behind them');

  // The event they all wait for comes with the lock's release: every read from now on answers its request.
  await events.release(quiet);
  const [pageRes, ...pollRes] = await Promise.all([page, ...polls]);
  t.equal(pageRes.statusCode, 200);
  t.same(pageRes.json().items.map((e: any) => e.data.customerUuid), [quiet], 'the page read after the lock went');
  t.same(pollRes.map((res) => [res.statusCode, res.json().items.length]), polls.map(() => [200, 1]), 'every re-read still ran and answered its long-poll');
  const before = answered.indexOf('page');
  // The two reads held in the database end first and the page takes the first slot they free (a
  // few re-reads may end on the other slot meanwhile); read in arrival order, it came after all n.
  t.ok(before < n / 3, `the page answered after ${before} of the ${n} long-polls`);
});

// A long-poll whose client had gone still ran its queued re-read, for nobody, ahead of the reads of
// those still waiting. Its read now leaves the queue when the client goes.
if (SERVER_URL) t.test('a long-poll whose client goes away while its read is queued leaves the queue: its read never runs', async (t) => {
  const database = await freshDatabase(t);
  const { app, logs } = await buildTestApp(t, { database });
  const base = await listen(app);
  const quiet = customer('left');
  const url = `${base}/v1/events?customerUuid=${quiet}&wait=30`;
  const n = 6;
  const polls = Array.from({ length: n - 1 }, () => httpRequest(url, { method: 'GET' }));
  await until(async () => (await gauge(app, 'underwriting_event_feed_waiters')) === n - 1, 10_000, `${n - 1} long-polls waiting`);
  // Registered last, so woken last: its re-read queues behind the two that take the slots.
  const client = new AbortController();
  const leaving = httpRequest(url, { method: 'GET', signal: client.signal }).catch(() => 'aborted');
  await until(async () => (await gauge(app, 'underwriting_event_feed_waiters')) === n, 10_000, 'the last long-poll waiting');

  const events = await lockEvents(t, database);
  await sql`select pg_notify(${RESULTS_CHANNEL}, 'someone-else')`.execute(database.db);
  const again = 'underwriting_event_feed_reads_queued{read="again"}';
  await until(async () => (await events.blocked()) === FEED_READS_IN_FLIGHT, 10_000, 'two re-reads held in the database');
  // (A waiter that read less than 50 ms before the wake reads again only then: MIN_REREAD_MS.)
  await until(async () => (await gauge(app, again)) === n - FEED_READS_IN_FLIGHT, 10_000, 'the others queued');
  client.abort();
  t.equal(await leaving, 'aborted');
  await until(async () => (await gauge(app, again)) === n - FEED_READS_IN_FLIGHT - 1, 10_000, 'the abandoned read out of the queue');
  t.equal(await events.blocked(), FEED_READS_IN_FLIGHT, 'while the reads in the database are still held');

  await events.release(quiet);
  for (const res of await Promise.all(polls)) t.same([res.status, res.json.items.length], [200, 1], 'every other long-poll answered');
  t.equal(await gauge(app, again), 0);
  t.equal(await gauge(app, 'underwriting_event_feed_reads_queued{read="first"}'), 0);
  const later = await app.inject({ method: 'GET', url: `/v1/events?customerUuid=${quiet}` });
  t.same([later.statusCode, later.json().items.length], [200, 1], 'a later page is read: no slot was left taken');
  t.same(logs.entries().filter((e) => e.level === 'error'), [], 'nothing logged as an error: the dropped read answers nobody an empty page');
});
