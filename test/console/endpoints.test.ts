import { Webhook } from 'standardwebhooks';
import t from 'tap';
import { customer, postCallback, resultBody } from '../callbacks/fixtures.js';
import { startReceiver } from '../events/receiver.js';
import { buildTestApp, listen } from '../helpers/app.js';
import { until } from '../helpers/until.js';
import { ensureConsoleBuilt, launchBrowser, watchedPage } from '../helpers/browser.js';

// The console's endpoints section in a real headless Chromium, against a real gateway pushing to
// a real receiver on 127.0.0.1.

const ADMIN_KEY = 'admin-key-0123456789abcdef';

const context = await (async () => {
  await ensureConsoleBuilt();
  return launchBrowser(t);
})();

t.test('with the admin key the endpoints section lists them; pause, resume, rotate secret and replay act through the API', async (t) => {
  const receiver = await startReceiver(t);
  const { app } = await buildTestApp(t, { env: { ADMIN_API_KEYS: ADMIN_KEY } });
  await app.ready();
  const admin = { authorization: `Bearer ${ADMIN_KEY}` };
  const created = (await app.inject({ method: 'POST', url: '/v1/endpoints', headers: admin, payload: { url: `${receiver.url}/hooks?token=hidden-123`, description: 'LOS' } })).json();
  const endpointOf = async () => (await app.inject({ url: `/v1/endpoints/${created.id}`, headers: admin })).json();

  const base = await listen(app);
  const { page, consoleErrors, pageErrors } = await watchedPage(context);
  await page.goto(`${base}/console`);
  const section = page.getByTestId('endpoints');
  await section.getByRole('button', { name: 'Manage endpoints (admin key)' }).click();
  await section.getByLabel('Admin key').fill(ADMIN_KEY);
  await section.getByRole('button', { name: 'Use admin key' }).click();
  const row = section.locator(`tr[data-endpoint="${created.id}"]`);
  await row.waitFor();
  t.match((await row.innerText()).replace(/\s+/g, ' '), new RegExp(`${receiver.url}/hooks\\?token=redacted LOS active 0 0 0`));
  t.notOk((await page.content()).includes('hidden-123'), 'the URL secret is not on the page');

  await row.getByRole('button', { name: 'Pause' }).click();
  await row.getByRole('button', { name: 'Resume' }).waitFor();
  t.equal((await endpointOf()).status, 'paused');
  await row.getByRole('button', { name: 'Resume' }).click();
  await row.getByRole('button', { name: 'Pause' }).waitFor();
  t.equal((await endpointOf()).status, 'active');

  await row.getByRole('button', { name: 'Rotate secret' }).click();
  const shown = await section.getByTestId('new-secret').locator('code').textContent();
  t.match(shown, /^whsec_/);
  const cust = customer('console-ep');
  await postCallback(app, resultBody(cust));
  const [got] = await receiver.waitFor((r) => r.json.data.customerUuid === cust);
  const verified = new Webhook(shown!).verify(got!.body, {
    'webhook-id': got!.headers['webhook-id'] as string,
    'webhook-timestamp': got!.headers['webhook-timestamp'] as string,
    'webhook-signature': got!.headers['webhook-signature'] as string,
  }) as { data: { customerUuid: string } };
  t.equal(verified.data.customerUuid, cust, 'the secret the page showed verifies the next delivery');

  await row.getByLabel('Replay since').fill('2000-01-01T00:00');
  await row.getByRole('button', { name: 'Replay' }).click();
  await section.getByTestId('endpoints-said').getByText(/^\d+ events? queued for /).waitFor();
  await receiver.count(2);
  t.pass('the replayed event was sent again');

  t.same(pageErrors.map(String), [], 'no uncaught error');
  t.same(consoleErrors.map((m) => m.text()), [], 'no console error');
  await page.close();
});

t.test('a wrong admin key is refused and asked for again, without asking for the query key', async (t) => {
  const { app } = await buildTestApp(t, { env: { ADMIN_API_KEYS: ADMIN_KEY } });
  const base = await listen(app);
  const { page } = await watchedPage(context);
  await page.goto(`${base}/console`);
  const section = page.getByTestId('endpoints');
  await section.getByRole('button', { name: 'Manage endpoints (admin key)' }).click();
  await section.getByLabel('Admin key').fill('wrong-admin-key-0123456789');
  await section.getByRole('button', { name: 'Use admin key' }).click();
  await section.getByText('The gateway refused that admin key.').waitFor();
  t.equal(await page.getByRole('heading', { name: 'API key' }).count(), 0, 'the query key form is not shown');
  await page.close();
});

t.test("Redeliver dead queues again that endpoint's dead deliveries only (POST /v1/events/redeliver with endpointId)", async (t) => {
  let up = false;
  const receiver = await startReceiver(t, () => (up ? 200 : 500));
  const other = await startReceiver(t, () => 500);
  const { app } = await buildTestApp(t, { env: { ADMIN_API_KEYS: ADMIN_KEY, EVENT_RETRY_HORIZON_S: '1', EVENT_WEBHOOK_TIMEOUT_MS: '1000' } });
  await app.ready();
  const admin = { authorization: `Bearer ${ADMIN_KEY}` };
  const create = async (url: string) => (await app.inject({ method: 'POST', url: '/v1/endpoints', headers: admin, payload: { url } })).json();
  const mine = await create(receiver.url);
  const theirs = await create(other.url);
  const cust = customer('console-ep-dead');
  await postCallback(app, resultBody(cust));
  const deadAt = async (id: string) => (await app.inject({ url: `/v1/endpoints/${id}`, headers: admin })).json().stats.dead as number;
  for (const id of [mine.id, theirs.id]) await until(async () => (await deadAt(id)) === 1, 20_000, `${id}'s delivery dead`);
  up = true;
  const base = await listen(app);
  const { page, consoleErrors, pageErrors } = await watchedPage(context);
  await page.goto(`${base}/console`);
  const section = page.getByTestId('endpoints');
  await section.getByRole('button', { name: 'Manage endpoints (admin key)' }).click();
  await section.getByLabel('Admin key').fill(ADMIN_KEY);
  await section.getByRole('button', { name: 'Use admin key' }).click();
  const row = section.locator(`tr[data-endpoint="${mine.id}"]`);
  const before = other.received.length;
  await row.getByRole('button', { name: 'Redeliver dead' }).click();
  await section.getByTestId('endpoints-said').getByText(`1 dead delivery queued again for ${receiver.url}/.`).waitFor();
  await receiver.waitFor((r) => r.json.data.customerUuid === cust && receiver.received.filter((x) => x.json.data.customerUuid === cust).length >= 2);
  t.pass('sent again to that endpoint');
  t.equal(await deadAt(theirs.id), 1, "the other endpoint's dead delivery stays dead");
  t.equal(other.received.length, before, 'and is not sent again');
  t.same(pageErrors.map(String), [], 'no uncaught error');
  t.same(consoleErrors.map((m) => m.text()), [], 'no console error');
  await page.close();
});
