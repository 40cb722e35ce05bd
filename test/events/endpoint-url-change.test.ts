import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t, { type Test } from 'tap';
import { customer } from '../callbacks/fixtures.js';
import { freshDatabase } from '../helpers/database.js';
import { buildTestApp } from '../helpers/app.js';
import { ADMIN_KEY, adminGateway, call, stray } from './admin.js';
import { until } from './fixtures.js';
import { startReceiver } from './receiver.js';

// A PATCH of an endpoint's url sends its waiting deliveries to the new URL: the feed, the metrics
// and the delivery log must name the URL they went to, not the one they waited for.

const shared = await freshDatabase(t);

/** A receiver that holds each request open until release(), then answers `status`: an attempt in flight for as long as a test needs. */
async function heldReceiver(t: Test, status: number, path: string) {
  let release: () => void = () => {};
  const released = new Promise<void>((resolve) => (release = resolve));
  let arrived: () => void = () => {};
  const attempted = new Promise<void>((resolve) => (arrived = resolve));
  const server = http.createServer((req, res) => {
    req.resume();
    arrived();
    void released.then(() => res.writeHead(status).end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}${path}`, attempted, release };
}

t.test("after a PATCH of its url, an endpoint's pending deliveries are shown with the new URL, and delivered there", async (t) => {
  const down = await startReceiver(t, () => 500);
  const up = await startReceiver(t);
  const { app } = await adminGateway(t, shared);
  const created = await call(app, 'POST', '/v1/endpoints', { url: `${down.url}/old`, types: ['callback.unmatched'] });
  t.equal(created.status, 201);
  const id = created.body.id as string;
  const cust = customer('url-change');
  await stray(app, cust);
  await down.waitFor((r) => r.json.data.customerUuid === cust);
  const delivery = async () => {
    const items = (await app.inject({ method: 'GET', url: `/v1/events?customerUuid=${cust}` })).json().items;
    return items[0].deliveries.find((d: any) => d.url.endsWith('/old') || d.url.endsWith('/new'));
  };
  await until(async () => ((await delivery())?.attempts >= 1 ? true : undefined));
  const patched = await call(app, 'PATCH', `/v1/endpoints/${id}`, { url: `${up.url}/new` });
  t.equal(patched.status, 200);
  t.equal(patched.body.url, `${up.url}/new`);
  t.equal((await delivery()).url, `${up.url}/new`, 'the waiting delivery is shown with the URL it will go to');
  const metrics = (await app.inject({ url: '/metrics' })).body;
  t.notMatch(metrics, new RegExp(`underwriting_event_url_deliveries\\{url="${down.url.replace(/[.]/g, '\\.')}",status="pending"\\} [1-9]`), 'nothing counted pending under the old origin');
  await up.waitFor((r) => r.json.data.customerUuid === cust);
  const done = await until(async () => {
    const d = await delivery();
    return d.status === 'delivered' ? d : undefined;
  });
  t.equal(done.url, `${up.url}/new`, 'delivered, and shown, at the new URL');
  await call(app, 'DELETE', `/v1/endpoints/${id}`);
});

t.test('a delivery whose attempt is in flight when a PATCH changes the url, delivered there, is shown with the URL it went to', async (t) => {
  const { url: oldUrl, attempted, release } = await heldReceiver(t, 200, '/old');
  const up = await startReceiver(t);
  const { app } = await adminGateway(t, shared);
  const created = await call(app, 'POST', '/v1/endpoints', { url: oldUrl, types: ['callback.unmatched'] });
  t.equal(created.status, 201);
  const id = created.body.id as string;
  const cust = customer('url-change-mid');
  await stray(app, cust);
  await attempted;
  t.equal((await call(app, 'PATCH', `/v1/endpoints/${id}`, { url: `${up.url}/new` })).status, 200);
  release();
  const done = await until(async () => {
    const items = (await app.inject({ method: 'GET', url: `/v1/events?customerUuid=${cust}` })).json().items;
    const d = items[0]?.deliveries?.find((x: any) => x.url.endsWith('/old') || x.url.endsWith('/new'));
    return d?.status === 'delivered' ? d : undefined;
  });
  t.equal(done.url, oldUrl, 'shown with the URL it was delivered to');
  t.equal(up.received.filter((r) => r.json.data.customerUuid === cust).length, 0, 'not sent again to the new URL');
  await call(app, 'DELETE', `/v1/endpoints/${id}`);
});

t.test('a delivery whose last attempt is in flight when a PATCH changes the url, and fails, ends dead and is shown with the URL it went to', async (t) => {
  const { url: oldUrl, attempted, release } = await heldReceiver(t, 500, '/old');
  const up = await startReceiver(t);
  // A horizon of 1 s, and a clock moved 2 s on while the attempt is open: it ends past the horizon
  // (dead), and well within its 10 s lease (EVENT_WEBHOOK_TIMEOUT_MS 5 s + 5 s), so it is recorded.
  let skewMs = 0;
  const { app } = await buildTestApp(t, {
    database: shared,
    clock: () => new Date(Date.now() + skewMs),
    env: { ADMIN_API_KEYS: ADMIN_KEY, EVENT_WEBHOOK_TIMEOUT_MS: '5000', EVENT_RETRY_HORIZON_S: '1' },
  });
  await app.ready();
  const created = await call(app, 'POST', '/v1/endpoints', { url: oldUrl, types: ['callback.unmatched'] });
  t.equal(created.status, 201);
  const id = created.body.id as string;
  const cust = customer('url-change-dead');
  await stray(app, cust);
  await attempted;
  t.equal((await call(app, 'PATCH', `/v1/endpoints/${id}`, { url: `${up.url}/new` })).status, 200);
  skewMs = 2000;
  release();
  const done = await until(async () => {
    const items = (await app.inject({ method: 'GET', url: `/v1/events?customerUuid=${cust}` })).json().items;
    const d = items[0]?.deliveries?.find((x: any) => x.url.endsWith('/old') || x.url.endsWith('/new'));
    return d?.status === 'dead' ? d : undefined;
  });
  t.equal(done.url, oldUrl, 'shown with the URL its last attempt went to');
  t.equal(done.lastStatus, 500);
  t.equal(up.received.filter((r) => r.json.data.customerUuid === cust).length, 0, 'never sent to the new URL');
  await call(app, 'DELETE', `/v1/endpoints/${id}`);
});
