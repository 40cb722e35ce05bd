import t from 'tap';
import { customer } from '../callbacks/fixtures.js';
import { freshDatabase } from '../helpers/database.js';
import { adminGateway, call, stray } from './admin.js';
import { until } from './fixtures.js';
import { startReceiver } from './receiver.js';

// A PATCH of an endpoint's url sends its waiting deliveries to the new URL: the feed, the metrics
// and the delivery log must name the URL they went to, not the one they waited for.

const shared = await freshDatabase(t);

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
