import t from 'tap';
import { customer, insertRequest, postCallback, resultBody, startedPlus } from '../callbacks/fixtures.js';
import { freshDatabase } from '../helpers/database.js';
import { adminGateway, call, stray } from './admin.js';
import { until } from './fixtures.js';
import { startReceiver } from './receiver.js';

// POST /v1/events/redeliver by endpoint, type, status and time range, against real receivers on 127.0.0.1.

const shared = await freshDatabase(t);

t.test('bulk redelivery by endpoint, type and status: dead or delivered, only to that endpoint, only of that type', async (t) => {
  let up = false;
  const failing = await startReceiver(t, () => (up ? 200 : 500));
  const other = await startReceiver(t);
  const { app } = await adminGateway(t, shared, { EVENT_RETRY_HORIZON_S: '1' });
  const since = new Date().toISOString();
  const a = (await call(app, 'POST', '/v1/endpoints', { url: failing.url })).body.id as string;
  const b = (await call(app, 'POST', '/v1/endpoints', { url: other.url })).body.id as string;
  t.teardown(async () => {
    await call(app, 'DELETE', `/v1/endpoints/${a}`);
    await call(app, 'DELETE', `/v1/endpoints/${b}`);
  });
  const cust = customer('bulk');
  await stray(app, cust, 1); // callback.unmatched
  await insertRequest(shared.db, { customerUuid: cust, status: 'submitted' });
  await postCallback(app, resultBody(cust, { started: startedPlus(30) })); // underwriting.completed
  const mine = (r: { json: { data: Record<string, any> } }) => r.json.data.customerUuid === cust;
  await other.waitFor((r) => mine(r) && r.json.type === 'underwriting.completed');
  // Both of a's deliveries die (horizon 1 s); b has both delivered.
  const statusesAt = async (endpointUrl: string) => {
    const feed = (await app.inject({ url: `/v1/events?customerUuid=${cust}` })).json();
    return feed.items.map((e: any) => e.deliveries.find((d: any) => d.url === `${endpointUrl}/`)?.status);
  };
  await until(async () => ((await statusesAt(failing.url)).every((s: string) => s === 'dead') ? true : undefined), 20_000, "a's deliveries dead");
  t.same(await statusesAt(other.url), ['delivered', 'delivered']);

  up = true;
  const before = { failing: failing.received.length, other: other.received.length };
  // Only a, only underwriting.completed, only dead.
  const one = await call(app, 'POST', '/v1/events/redeliver', { status: 'dead', endpointId: a, type: 'underwriting.completed', since }, false);
  t.equal(one.status, 202);
  t.equal(one.body.queued, 1);
  await failing.waitFor((r) => failing.received.indexOf(r) >= before.failing && mine(r));
  t.same(
    await until(async () => {
      const now = await statusesAt(failing.url);
      return now.includes('delivered') ? now : undefined;
    }),
    ['dead', 'delivered'],
    'the completed one delivered; the unmatched one stays dead',
  );
  // Delivered ones, to b only, in a time range that holds both events: sent again.
  const again = await call(app, 'POST', '/v1/events/redeliver', { status: 'delivered', endpointId: b, since, until: new Date(Date.now() + 60_000).toISOString() }, false);
  t.equal(again.status, 202);
  t.equal(again.body.queued, 2);
  const got = await other.waitFor(() => other.received.slice(before.other).filter(mine).length >= 2);
  t.same(got.slice(before.other).filter(mine).map((r) => r.json.type), ['callback.unmatched', 'underwriting.completed'], 'in order');
  t.equal(failing.received.slice(before.failing).filter(mine).length, 1, 'nothing more to a');
  // The body as it always was: every endpoint's dead deliveries.
  const all = await call(app, 'POST', '/v1/events/redeliver', { status: 'dead', since }, false);
  t.equal(all.status, 202);
  t.equal(all.body.queued, 1, "a's remaining dead one");

  t.equal((await call(app, 'POST', '/v1/events/redeliver', { status: 'dead', endpointId: `ep_${'0'.repeat(32)}` }, false)).status, 404);
  t.equal((await call(app, 'POST', '/v1/events/redeliver', { status: 'pending' }, false)).status, 400);
  t.equal((await call(app, 'POST', '/v1/events/redeliver', { status: 'dead', endpointId: 'nope' }, false)).status, 400);
  t.equal((await call(app, 'POST', '/v1/events/redeliver', { status: 'dead', type: 'nope' }, false)).status, 400);
  // Delivered ones only within a bound (since or endpointId): never the whole history at once.
  for (const body of [{ status: 'delivered' }, { status: 'delivered', type: 'underwriting.completed' }, { status: 'delivered', until: new Date().toISOString() }]) {
    const res = await call(app, 'POST', '/v1/events/redeliver', body, false);
    t.equal(res.status, 400, JSON.stringify(body));
    t.equal(res.body.error, 'validation_failed');
    t.match(JSON.stringify(res.body), /status.*since or endpointId/);
  }
});
