import { Webhook } from 'standardwebhooks';
import t, { type Test } from 'tap';
import { buildTestApp } from '../helpers/app.js';
import { anotherConnection, freshDatabase } from '../helpers/database.js';
import { customer, insertRequest, postCallback, resultBody, startedPlus } from '../callbacks/fixtures.js';
import { getJson, pushEnv, webhookSecret } from './fixtures.js';
import { until } from '../helpers/until.js';
import { startReceiver } from './receiver.js';

// Real HTTP receivers on 127.0.0.1; deliveries are checked with the reference Standard Webhooks
// verifier, never with our own signer.

const shared = await freshDatabase(t);

async function pushingGateway(t: Test, urls: string[], secret: string, extra: Record<string, string> = {}) {
  const built = await buildTestApp(t, { database: shared, env: pushEnv(urls, secret, extra) });
  await built.app.ready();
  return built;
}

t.test('a completed request is pushed once, signed so that the standardwebhooks package verifies it', async (t) => {
  const receiver = await startReceiver(t, undefined, { ownPath: true });
  const secret = webhookSecret();
  const { app } = await pushingGateway(t, [`${receiver.url}/hooks`], secret);
  const cust = customer('push');
  await insertRequest(shared.db, { customerUuid: cust, status: 'submitted' });
  t.equal((await postCallback(app, resultBody(cust))).statusCode, 200);

  const [got] = await receiver.count(1);
  const verified = new Webhook(secret).verify(got!.body, {
    'webhook-id': got!.headers['webhook-id'] as string,
    'webhook-timestamp': got!.headers['webhook-timestamp'] as string,
    'webhook-signature': got!.headers['webhook-signature'] as string,
  }) as Record<string, any>;
  t.equal(verified.type, 'underwriting.completed');
  t.match(got!.headers['webhook-id'], /^evt_[0-9a-f]{32}$/);
  t.equal(verified.id, got!.headers['webhook-id'], 'webhook-id is the event id');
  t.equal(got!.headers['content-type'], 'application/json');
  t.throws(() => new Webhook(webhookSecret()).verify(got!.body, got!.headers as Record<string, string>), 'another secret does not verify it');

  // data is the request exactly as GET returns it, without history and unmatched.
  const { body: view } = await getJson(app, `/v1/underwritings/${cust}`);
  const { history, unmatched, ...request } = view;
  t.same(history, []);
  t.same(unmatched, []);
  t.same(verified.data, request);

  // The event, with its delivery, is in the feed and under its id.
  const stored = await until(async () => {
    const got = await getJson(app, `/v1/events/${verified.id}`);
    return got.body.deliveries?.[0]?.status === 'delivered' ? got : undefined;
  });
  t.equal(stored.status, 200);
  t.match(stored.body, { id: verified.id, type: 'underwriting.completed', timestamp: verified.timestamp, data: request });
  t.match(stored.body.deliveries, [{ url: `${receiver.url}/hooks`, status: 'delivered', attempts: 1, lastStatus: 200, lastError: null }]);
});

t.test('an unmatched callback is pushed as callback.unmatched with customerUuid, receivedAt and result', async (t) => {
  const receiver = await startReceiver(t, undefined, { ownPath: true });
  const secret = webhookSecret();
  const { app } = await pushingGateway(t, [receiver.url], secret);
  const cust = customer('stray');
  const body = resultBody(cust);
  await postCallback(app, body);
  const [got] = await receiver.count(1);
  t.equal(got!.json.type, 'callback.unmatched');
  t.same(Object.keys(got!.json.data).sort(), ['customerUuid', 'receivedAt', 'result']);
  t.match(got!.json.data, { customerUuid: cust, result: body });
  t.match(got!.json.data.receivedAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
});

t.test('a failed attempt is retried within seconds with the same webhook-id, and a later event of that customer waits for it', async (t) => {
  const secret = webhookSecret();
  // The first attempt of the first event fails, asking for 3 s (the backoff alone retries after
  // 0.5-1 s, which a slow host can spend posting the other customer's callback); everything else succeeds.
  const receiver = await startReceiver(t, (_r, n) => (n === 1 ? { status: 503, headers: { 'retry-after': '3' } } : 200), { ownPath: true });
  const { app } = await pushingGateway(t, [receiver.url], secret);
  const [held, free] = [customer('held'), customer('free')];
  await insertRequest(shared.db, { customerUuid: held, status: 'submitted' });
  await postCallback(app, resultBody(held)); // completed: its first attempt fails
  await postCallback(app, resultBody(held, { started: startedPlus(5) })); // unmatched: must wait
  await receiver.count(1);
  await postCallback(app, resultBody(free)); // another customer: not held back

  const all = await receiver.count(4);
  const ofHeld = all.filter((r) => r.json.data.customerUuid === held);
  t.same(
    ofHeld.map((r) => r.json.type),
    ['underwriting.completed', 'underwriting.completed', 'callback.unmatched'],
    'the retry comes before the later event',
  );
  t.equal(ofHeld[0]!.headers['webhook-id'], ofHeld[1]!.headers['webhook-id'], 'the retry keeps its webhook-id');
  t.ok(ofHeld[1]!.at - ofHeld[0]!.at < 10_000, `retried after ${ofHeld[1]!.at - ofHeld[0]!.at} ms (asked for 3 s)`);
  const freeAt = all.findIndex((r) => r.json.data.customerUuid === free);
  t.ok(freeAt < all.indexOf(ofHeld[1]!), 'the other customer was delivered while the failing one waited');
  for (const r of all) new Webhook(secret).verify(r.body, r.headers as Record<string, string>);

  const event = await until(async () => {
    const got = await getJson(app, `/v1/events/${ofHeld[0]!.json.id}`);
    return got.body.deliveries[0].status === 'delivered' ? got : undefined;
  });
  t.match(event.body.deliveries, [{ status: 'delivered', attempts: 2, lastStatus: 200, lastError: null }]);
});

t.test('a delivery with no 2xx within EVENT_RETRY_HORIZON_S is dead, with its attempts, status and error kept; then the next event goes', async (t) => {
  const receiver = await startReceiver(t, (r) => (r.json.type === 'underwriting.completed' ? 500 : 200), { ownPath: true });
  // 3 s: the horizon counts from the event's creation, and at 1 s a slow host's first attempt
  // could end past it (dead after one attempt, where two are asserted).
  const { app } = await pushingGateway(t, [receiver.url], webhookSecret(), { EVENT_RETRY_HORIZON_S: '3' });
  const cust = customer('dead');
  await insertRequest(shared.db, { customerUuid: cust, status: 'submitted' });
  await postCallback(app, resultBody(cust));
  await postCallback(app, resultBody(cust, { started: startedPlus(5) }));
  const all = await receiver.waitFor((r) => r.json.type === 'callback.unmatched');
  const completed = all.filter((r) => r.json.type === 'underwriting.completed');
  t.ok(completed.length >= 2, `${completed.length} attempts before it died`);
  t.equal(all.at(-1)!.json.type, 'callback.unmatched', 'the later event went once the earlier was dead');

  const event = await until(async () => {
    const got = await getJson(app, `/v1/events/${completed[0]!.json.id}`);
    return got.body.deliveries[0].status === 'dead' ? got : undefined;
  });
  await until(async () => (/underwriting_event_deliveries_total\{result="delivered"\} 1/.test((await app.inject({ method: 'GET', url: '/metrics' })).body) ? true : undefined));
  t.match(event.body.deliveries, [{ status: 'dead', attempts: completed.length, lastStatus: 500, lastError: /500/ }]);
  const metrics = (await app.inject({ method: 'GET', url: '/metrics' })).body;
  t.match(metrics, /underwriting_event_deliveries_total\{result="dead"\} 1/);
  t.match(metrics, /underwriting_event_deliveries_total\{result="delivered"\} 1/);
});

t.test('a receiver that hangs is timed out and the event retried', async (t) => {
  const receiver = await startReceiver(t, (_r, n) => (n === 1 ? 'hang' : 204), { ownPath: true });
  // Long enough that the second, prompt answer is never itself timed out on a machine busy with
  // other test files (at 300 ms it once was: a third attempt; 1500 ms is no margin at load 8-16).
  const { app } = await pushingGateway(t, [receiver.url], webhookSecret(), { EVENT_WEBHOOK_TIMEOUT_MS: '3000' });
  const cust = customer('hang');
  await postCallback(app, resultBody(cust));
  const [first, second] = await receiver.count(2);
  t.equal(first!.headers['webhook-id'], second!.headers['webhook-id']);
  const delivered = await until(async () => {
    const event = await getJson(app, `/v1/events/${first!.json.id}`);
    return event.body.deliveries[0].status === 'delivered' ? event.body.deliveries[0] : undefined;
  });
  t.match(delivered, { attempts: 2, lastStatus: 204, lastError: null });
});

t.test('a redirect is not followed: it is a failed attempt', async (t) => {
  const target = await startReceiver(t, undefined, { ownPath: true });
  const receiver = await startReceiver(t, (_r, n) => (n === 1 ? 307 : 200), { ownPath: true });
  const { app } = await pushingGateway(t, [receiver.url], webhookSecret());
  const cust = customer('redirect');
  await postCallback(app, resultBody(cust));
  const [first, second] = await receiver.count(2);
  t.equal(first!.headers['webhook-id'], second!.headers['webhook-id'], 'retried at the configured URL');
  t.equal(target.received.length, 0);
});

t.test("a URL's userinfo and query secrets appear in no log and no answer; userinfo becomes Basic credentials", async (t) => {
  const receiver = await startReceiver(t, (_r, n) => (n === 1 ? 500 : 200), { ownPath: true });
  const url = new URL(receiver.url);
  const configured = `http://hookuser:hookPassw0rdSecret@127.0.0.1:${url.port}/in?token=queryTokenSecret42&x=1`;
  const secret = webhookSecret();
  const { app, logs } = await pushingGateway(t, [configured], secret);
  const cust = customer('secret');
  await postCallback(app, resultBody(cust));
  const [first] = await receiver.count(2);
  t.equal(first!.url, '/in?token=queryTokenSecret42&x=1', 'sent to the URL as configured');
  t.equal(first!.headers.authorization, `Basic ${Buffer.from('hookuser:hookPassw0rdSecret').toString('base64')}`);

  const event = await getJson(app, `/v1/events/${first!.json.id}`);
  t.equal(event.body.deliveries[0].url, `http://127.0.0.1:${url.port}/in?token=redacted&x=redacted`);
  const feed = await getJson(app, `/v1/events?customerUuid=${cust}`);
  const docs = await app.inject({ method: 'GET', url: '/docs/json' });
  for (const text of [event.text, feed.text, logs.text(), docs.body]) {
    t.notMatch(text, /hookPassw0rdSecret|queryTokenSecret42|hookuser/);
    t.notMatch(text, secret.slice(6));
  }
});

t.test('two instances sharing the database deliver each event once', async (t) => {
  const receiver = await startReceiver(t, undefined, { ownPath: true });
  const secret = webhookSecret();
  // A generous timeout: on PGlite the engine shares the test's only thread, and an answer read
  // late would be a (legitimate) retry.
  const extra = { EVENT_WEBHOOK_TIMEOUT_MS: '10000' };
  const one = await pushingGateway(t, [receiver.url], secret, extra);
  const other = await buildTestApp(t, { database: await anotherConnection(t, shared), env: pushEnv([receiver.url], secret, extra) });
  await other.app.ready();
  const customers = Array.from({ length: 60 }, () => customer('pair'));
  await Promise.all(customers.map((c) => insertRequest(shared.db, { customerUuid: c, status: 'submitted' })));
  await Promise.all(customers.map((c, i) => postCallback(i % 2 === 0 ? one.app : other.app, resultBody(c))));
  const all = await receiver.count(60);
  // Every delivery recorded as delivered at its first attempt: a second send would need a second lease.
  const rows = await until(async () => {
    const r = await shared.db
      .selectFrom('event_deliveries as d')
      .innerJoin('events as e', 'e.id', 'd.event_id')
      .select(['d.status', 'd.attempts'])
      .where('e.customer_uuid', 'in', customers)
      .execute();
    return r.length === 60 && r.every((d) => d.status === 'delivered') ? r : undefined;
  });
  t.ok(rows.every((d) => d.attempts === 1), 'each sent at one attempt');
  t.equal(receiver.received.length, 60, 'no event sent twice');
  t.equal(new Set(all.map((r) => r.json.id)).size, 60);
});

t.test('stopping an instance cuts its attempts short and leaves the deliveries pending for the next claim', async (t) => {
  const receiver = await startReceiver(t, () => 'hang', { ownPath: true });
  const { app } = await pushingGateway(t, [receiver.url], webhookSecret(), { EVENT_WEBHOOK_TIMEOUT_MS: '30000' });
  const cust = customer('stop');
  await postCallback(app, resultBody(cust));
  const [got] = await receiver.count(1);
  const began = Date.now();
  await app.close();
  // Far under the 30 s timeout, with room for a loaded host's close (its workers' drain, the pool's end).
  t.ok(Date.now() - began < 15_000, `closed in ${Date.now() - began} ms, not after the 30 s timeout`);
  const [row] = await shared.db
    .selectFrom('event_deliveries as d')
    .innerJoin('events as e', 'e.id', 'd.event_id')
    .select(['d.status', 'd.lease_token', 'd.last_error', 'e.public_id'])
    .where('e.customer_uuid', '=', cust)
    .execute();
  t.match(row, { public_id: got!.json.id, status: 'pending', lease_token: null, last_error: /interrupted/ });
});
