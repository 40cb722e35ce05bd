import { randomBytes } from 'node:crypto';
import pg from 'pg';
import pino from 'pino';
import t, { type Test } from 'tap';
import { readEvent } from '../../src/events/feed-sql.js';
import { pendingSummary } from '../../src/events/pending-sql.js';
import { dispatchDeliveries, startDispatch } from '../../src/events/queue-sql.js';
import { endpointRegistry, fixedEndpoints } from '../../src/events/endpoints/registry.js';
import { deleteEndpoint, insertEndpoint, lockEndpoint } from '../../src/events/endpoints/sql.js';
import { urlKeyer } from '../../src/events/url-key.js';
import { startDeliveryWorker } from '../../src/events/worker.js';
import { recordResults, type ValidResult } from '../../src/requests/complete.js';
import { customer, insertRequest, resultBody, startedPlus } from '../callbacks/fixtures.js';
import { buildTestApp, TEST_CPF_HASH_KEY } from '../helpers/app.js';
import { anotherConnection, freshDatabase, SERVER_URL } from '../helpers/database.js';
import { configuredTarget, getJson, pushEnv, webhookSecret } from './fixtures.js';
import { until } from '../helpers/until.js';
import { startReceiver } from './receiver.js';

// The statement that records an event writes no delivery: the delivery worker writes them from
// the feed, past each URL's position. What that must keep: nothing lost while no instance pushes,
// nothing pushed that predates a URL, pending shown until written, and the per-customer order.

const shared = await freshDatabase(t);

async function pushingGateway(t: Test, urls: string[], secret: string) {
  const built = await buildTestApp(t, { database: shared, env: pushEnv(urls, secret) });
  await built.app.ready();
  return built;
}

/** Stores a callback the way the group commit does, on an instance that does not push. */
async function storeResult(cust: string, overrides: Parameters<typeof resultBody>[1] = {}, db = shared.db): Promise<void> {
  const body = resultBody(cust, overrides);
  const json = JSON.stringify(body);
  const result: ValidResult = {
    receivedAt: new Date(),
    peer: null,
    rawBody: Buffer.from(json),
    customerUuid: cust,
    started: body.started,
    finished: body.finished,
    body: json,
    decision: 'approved',
  };
  await recordResults(db, [result], { skewS: 300 });
}

async function eventIdOf(cust: string): Promise<string> {
  const row = await shared.db.selectFrom('events').select('public_id').where('customer_uuid', '=', cust).orderBy('id').executeTakeFirstOrThrow();
  return row.public_id;
}

t.test('an event recorded while no instance pushes shows its delivery pending, and goes out once one starts', async (t) => {
  const receiver = await startReceiver(t, undefined, { ownPath: true });
  const target = configuredTarget(receiver.url);
  const secret = webhookSecret();
  // An instance pushing to the URL ran once (its position is kept), then stopped.
  const first = await pushingGateway(t, [receiver.url], secret);
  await first.app.close();

  const cust = customer('while-none');
  await insertRequest(shared.db, { customerUuid: cust, status: 'submitted' });
  await storeResult(cust);
  const id = await eventIdOf(cust);

  const unwritten = await readEvent(shared.db, id, [target.key]);
  t.match(unwritten?.deliveries, [{ url: target.shown, status: 'pending', attempts: 0, last_attempt_at: null }], 'pending for the configured URL, though not written');
  t.same((await readEvent(shared.db, id, []))?.deliveries ?? [], [], 'no URL configured: no delivery shown');
  t.ok((await pendingSummary(shared.db, [target.key])).pending >= 1, 'counted as pending');
  t.equal(await shared.db.selectFrom('event_deliveries').select('id').where('customer_uuid', '=', cust).executeTakeFirst(), undefined, 'no delivery row yet');

  const { app } = await pushingGateway(t, [receiver.url], secret);
  const got = await receiver.waitFor((r) => r.json.data.customerUuid === cust);
  t.equal(got.filter((r) => r.json.data.customerUuid === cust).length, 1, 'delivered once');
  const event = await until(async () => {
    const read = await getJson(app, `/v1/events/${id}`);
    return read.body.deliveries?.[0]?.status === 'delivered' ? read : undefined;
  });
  t.match(event.body.deliveries, [{ url: receiver.url, status: 'delivered', attempts: 1, lastStatus: 200 }]);
  t.equal(event.body.deliveries.length, 1, 'one delivery: the written one replaces the pending one shown');
});

t.test('a URL configured for the first time receives the events recorded from then on, not those before', async (t) => {
  const receiver = await startReceiver(t, undefined, { ownPath: true });
  const before = customer('before-url');
  await insertRequest(shared.db, { customerUuid: before, status: 'submitted' });
  await storeResult(before);

  const { app } = await pushingGateway(t, [receiver.url], webhookSecret());
  const after = customer('after-url');
  await insertRequest(shared.db, { customerUuid: after, status: 'submitted' });
  await storeResult(after);

  const got = await receiver.waitFor((r) => r.json.data.customerUuid === after);
  t.notOk(got.some((r) => r.json.data.customerUuid === before), 'the earlier event is not pushed');
  const { body } = await getJson(app, `/v1/events/${await eventIdOf(before)}`);
  t.same(body.deliveries, [], 'and shows no delivery');
});

t.test("two events of one customer dispatched together go out in order: the later waits for the earlier's retry", async (t) => {
  // The first attempt of the customer's first event fails.
  let firstSeen = false;
  const receiver = await startReceiver(t, (r) => {
    if (r.json.type === 'underwriting.completed' && !firstSeen) {
      firstSeen = true;
      return 503;
    }
    return 200;
  }, { ownPath: true });
  const secret = webhookSecret();
  const first = await pushingGateway(t, [receiver.url], secret);
  await first.app.close();

  // Both recorded while no instance pushes: one dispatch writes both.
  const cust = customer('pair');
  await insertRequest(shared.db, { customerUuid: cust, status: 'submitted' });
  await storeResult(cust); // completed
  await storeResult(cust, { started: startedPlus(5) }); // unmatched, later

  await pushingGateway(t, [receiver.url], secret);
  const all = await receiver.waitFor((r) => r.json.type === 'callback.unmatched' && r.json.data.customerUuid === cust);
  const ofCust = all.filter((r) => r.json.data.customerUuid === cust);
  t.same(
    ofCust.map((r) => r.json.type),
    ['underwriting.completed', 'underwriting.completed', 'callback.unmatched'],
    'the retry of the earlier event comes before the later one',
  );
});

// An instance's endpoints are a read up to 500 ms old (the registry), and an instance that starts
// sees every API endpoint for the first time: an endpoint deleted through the API on another
// instance within that read is still in the worker's targets. Its dispatch position, deleted with
// it, must stay deleted: started again, the stale read had the next dispatch write it deliveries
// that nothing ever ends (the delete had ended its pending ones; its row is gone, so no DELETE,
// redelivery or resume reaches them), pending for good in /v1/stats and the scrape.
t.test('a worker still seeing an endpoint deleted since its last read neither starts its dispatch again nor writes it deliveries; the live endpoint beside it gets every event', async (t) => {
  const { db } = await freshDatabase(t);
  const receiver = await startReceiver(t, undefined, { ownPath: true });
  const secret = webhookSecret();
  const live = configuredTarget(receiver.url);
  const doomed = { id: `ep_${randomBytes(16).toString('hex')}`, url: 'http://127.0.0.1:9/deleted' };
  await db.transaction().execute((tx) =>
    insertEndpoint(tx, { ...doomed, key: doomed.id, managed: 'api', shownUrl: doomed.url, description: '', types: null, rateLimitPerS: null, maxInFlight: null, secret: webhookSecret() }, new Date()),
  );

  // This instance reads the endpoints (and writes its configured URL's row and position, as at start)...
  const registry = endpointRegistry({ db, configured: { urls: [receiver.url], secret }, urlKeys: urlKeyer([TEST_CPF_HASH_KEY]), log: pino({ level: 'silent' }), refreshMs: 3_600_000 });
  t.teardown(() => registry.stop());
  await registry.refresh();
  await startDispatch(db, [live], new Date());
  t.ok(registry.targets().some((e) => e.key === doomed.id && e.status === 'active'), 'the read holds the endpoint');
  // ...then the endpoint is deleted through the API (DELETE /v1/endpoints/:id's transaction), before its next read.
  await db.transaction().execute(async (tx) => {
    const row = await lockEndpoint(tx, doomed.id, 'change');
    await deleteEndpoint(tx, row!, new Date());
  });
  const position = () => db.selectFrom('event_dispatch').select('url_key').where('url_key', '=', doomed.id).executeTakeFirst();
  const deliveries = () => db.selectFrom('event_deliveries').select(['id', 'status']).where('url_key', '=', doomed.id).execute();
  t.equal(await position(), undefined, 'the delete removed its position');

  const first = customer('stale-1');
  await storeResult(first, {}, db);
  const worker = startDeliveryWorker({ db, endpoints: registry, disableAfterS: 86_400, clock: () => new Date(), timeoutMs: 5_000, horizonS: 3600, log: pino({ level: 'silent' }), pollMs: 600_000 });
  t.teardown(() => worker.stop());
  await receiver.waitFor((r) => r.json.data.customerUuid === first);
  t.equal(await position(), undefined, 'the first dispatch of the worker, the deleted endpoint among its targets, did not start its position again');

  // An event recorded now is past any position started meanwhile: the next dispatch writes its deliveries.
  const second = customer('stale-2');
  await storeResult(second, {}, db);
  worker.wake();
  await receiver.waitFor((r) => r.json.data.customerUuid === second);
  t.same(await deliveries(), [], 'no delivery written for the deleted endpoint');
  t.equal(await position(), undefined);
});

if (SERVER_URL) {
  t.test('a dispatch running as fast as it can while eight writers commit 2,000 events writes each delivery exactly once', async (t) => {
    const writers = await anotherConnection(t, shared);
    const target = { key: `race-${customer('k').slice(-8)}`, shown: 'http://127.0.0.1:9/race' };
    await startDispatch(shared.db, [target], new Date());
    const tag = customer('drace').slice(-8);
    const n = 2000;
    let done = false;
    // Batches of 1 to 25 results, as the group commit writes them.
    const writing = Promise.all(
      Array.from({ length: 8 }, async (_, w) => {
        for (let i = w * 250, size = 1 + w * 3; i < (w + 1) * 250; i += size) {
          const batch = Array.from({ length: Math.min(size, (w + 1) * 250 - i) }, (_, k): ValidResult => {
            const body = resultBody(`drace-${tag}-${i + k}`);
            const json = JSON.stringify(body);
            return { receivedAt: new Date(), peer: null, rawBody: Buffer.from(json), customerUuid: body.customerUuid, started: body.started, finished: body.finished, body: json, decision: 'approved' };
          });
          await recordResults(writers.db, batch, { skewS: 300 });
        }
      }),
    ).then(() => (done = true));
    for (;;) {
      const finished = done;
      const round = await dispatchDeliveries(shared.db, { now: new Date(), targets: [target], limit: 7, leaseS: 60, token: 'race' });
      if (finished && !round.full && round.deliveries.length === 0) break;
    }
    await writing;
    const ours = await shared.db
      .selectFrom('events as e')
      .leftJoin('event_deliveries as d', (j) => j.onRef('d.event_id', '=', 'e.id').on('d.url_key', '=', target.key))
      .select(['e.id', 'e.tx_id', 'd.id as delivery'])
      .where('e.customer_uuid', 'like', `drace-${tag}-%`)
      .execute();
    t.equal(ours.length, n);
    t.same(ours.filter((e) => e.delivery === null), [], 'every event has its delivery: none passed over');
  });
}

if (SERVER_URL) {
  t.test('an attempt a dispatch begins while the instance is stopping is cut short at once', async (t) => {
    const receiver = await startReceiver(t, () => 'hang', { ownPath: true });
    const target = configuredTarget(receiver.url);
    await startDispatch(shared.db, [target], new Date());
    const cust = customer('stopping');
    await storeResult(cust);
    const event = await shared.db.selectFrom('events').select('id').where('customer_uuid', '=', cust).executeTakeFirstOrThrow();

    // Another transaction writes the same delivery and holds it: the worker's first dispatch waits on it.
    const blocker = new pg.Client({ connectionString: shared.url! });
    await blocker.connect();
    t.teardown(() => blocker.end());
    await blocker.query('begin');
    await blocker.query(
      `insert into event_deliveries (event_id, customer_uuid, url_key, url, queued_at, next_attempt_at) values ($1, $2, $3, $4, now(), now())`,
      [event.id, cust, target.key, target.shown],
    );
    const { rows: held } = await blocker.query<{ xid: string }>(`select (pg_current_xact_id()::text::bigint % 4294967296)::text as xid`);
    const worker = startDeliveryWorker({
      db: shared.db,
      endpoints: fixedEndpoints([target], webhookSecret()),
      disableAfterS: 86_400,
      clock: () => new Date(),
      timeoutMs: 30_000,
      horizonS: 3600,
      log: pino({ level: 'silent' }),
      pollMs: 600_000,
    });
    await until(async () => {
      // Waiting on the blocker's transaction (other test files' waits are in pg_locks too).
      const { rows } = await blocker.query(`select 1 from pg_locks where not granted and locktype = 'transactionid' and transactionid::text = $1`, [held[0]!.xid]);
      return rows.length > 0 ? true : undefined;
    });

    // Stop while the dispatch waits; it then writes the delivery (the blocker rolls back) and begins its attempt.
    const began = Date.now();
    const stopped = worker.stop();
    await blocker.query('rollback');
    await stopped;
    // Far under the 30 s timeout, with room for a loaded host's stop.
    t.ok(Date.now() - began < 15_000, `stopped in ${Date.now() - began} ms, not after the 30 s timeout`);
    const row = await shared.db
      .selectFrom('event_deliveries')
      .select(['status', 'lease_token', 'last_error'])
      .where('event_id', '=', event.id)
      .executeTakeFirstOrThrow();
    t.match(row, { status: 'pending', lease_token: null, last_error: /interrupted/ });
  });
}
