import { sql } from 'kysely';
import t from 'tap';
import { customer } from '../callbacks/fixtures.js';
import { freshDatabase } from '../helpers/database.js';
import { redactUrl } from '../../src/observability/logger.js';
import { adminGateway, call, stray } from './admin.js';
import { until } from './fixtures.js';

// A CPF in an endpoint URL's host name (a per-customer subdomain, a typo) is masked wherever the URL
// is shown, stored with a delivery, logged or labelled, as one in its path is.

const shared = await freshDatabase(t);
const CPF = /52998224725|529\.982\.247-25|39053344705/;

t.test("a CPF in an endpoint URL's host name is never shown, stored with a delivery, logged or in the metrics", async (t) => {
  const { app, logs } = await adminGateway(t, shared);
  const made = [];
  for (const url of ['http://529.982.247-25.invalid:9/hook', 'http://cust-39053344705.invalid/hook']) {
    const created = await call(app, 'POST', '/v1/endpoints', { url, types: ['callback.unmatched'] });
    t.equal(created.status, 201, JSON.stringify(created.body));
    made.push(created.body);
  }
  t.same(
    made.map((e) => e.url),
    ['http://***.***.***-**.invalid:9/hook', 'http://cust-***********.invalid/hook'],
  );
  const cust = customer('ep-host-cpf');
  await stray(app, cust);
  // Both attempts failed (the host does not resolve): their errors name the host.
  const feed = await until(async () => {
    const items = (await app.inject({ method: 'GET', url: `/v1/events?customerUuid=${cust}` })).json().items;
    const failed = items[0]?.deliveries.filter((d: any) => d.lastError !== null) ?? [];
    return failed.length >= 2 ? items : undefined;
  });
  await until(async () => (logs.text().includes('event delivery failed') ? true : undefined));
  const listed = await call(app, 'GET', '/v1/endpoints');
  const stored = await sql`select url, last_error from event_deliveries where url like '%.invalid%'`.execute(shared.db);
  const dispatch = await sql`select url from event_dispatch where url like '%.invalid%'`.execute(shared.db);
  const metrics = (await app.inject({ url: '/metrics' })).body;
  for (const [what, text] of [
    ['the answer', JSON.stringify(made)],
    ['the list', JSON.stringify(listed.body)],
    ['the feed', JSON.stringify(feed)],
    ['the deliveries', JSON.stringify(stored.rows)],
    ['the dispatch positions', JSON.stringify(dispatch.rows)],
    ['the metrics', metrics],
    ['the log', logs.text()],
  ] as const) {
    t.notMatch(text, CPF, `${what}: no CPF`);
  }
  t.match(metrics, /underwriting_event_url_deliveries\{url="http:\/\/\*\*\*\.\*\*\*\.\*\*\*-\*\*\.invalid:9",status="pending"\} 1/, 'the label shows the host masked');
  for (const e of made) await call(app, 'DELETE', `/v1/endpoints/${e.id}`);
});

t.test('an IP address in a URL is shown as it is, even when its digits read as a CPF', async (t) => {
  // 19216810041 has a CPF's check digits: as text, 192.168.100.41 would be masked.
  t.equal(redactUrl('http://192.168.100.41:8080/a'), 'http://192.168.100.41:8080/a');
  t.equal(redactUrl('http://[::1]:8080/a'), 'http://[::1]:8080/a');
  t.equal(redactUrl('https://hooks.529.982.247-25.example/a?k=v'), 'https://hooks.***.***.***-**.example/a?k=redacted');
});
