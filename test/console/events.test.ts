import t from 'tap';
import { customer, postCallback, resultBody } from '../callbacks/fixtures.js';
import { pushEnv, until, webhookSecret } from '../events/fixtures.js';
import { startReceiver } from '../events/receiver.js';
import { buildTestApp, listen } from '../helpers/app.js';
import { ensureConsoleBuilt, launchBrowser, watchedPage } from '../helpers/browser.js';

// Dead events made for real: a receiver on 127.0.0.1 answers 500 until the deliveries die
// (EVENT_RETRY_HORIZON_S=1), then 204; the console's redeliver buttons bring them to delivered.

const context = await (async () => {
  await ensureConsoleBuilt();
  return launchBrowser(t);
})();

t.test('dead events are listed; redeliver, one and then all, makes their deliveries show as delivered', async (t) => {
  let failing = true;
  const receiver = await startReceiver(t, () => (failing ? 500 : 204));
  const { app } = await buildTestApp(t, { env: pushEnv([`${receiver.url}/hooks`], webhookSecret(), { EVENT_RETRY_HORIZON_S: '1' }) });
  await app.ready();
  // Two customers' unmatched callbacks: two events, pushed independently, both dying.
  const [first, second] = [customer('dead-one'), customer('dead-two')];
  for (const cust of [first, second]) t.equal((await postCallback(app, resultBody(cust))).statusCode, 200);
  const stats = await until(async () => {
    const body = (await app.inject({ url: '/v1/stats' })).json();
    return body.now.events.dead === 2 && body.now.events.pending === 0 ? body : undefined;
  });
  const feed = (await app.inject({ url: '/v1/events' })).json();
  const idOf = (cust: string) => feed.items.find((e: { data: { customerUuid: string } }) => e.data.customerUuid === cust).id as string;
  const [firstId, secondId] = [idOf(first), idOf(second)];
  failing = false;

  const base = await listen(app);
  const { page, consoleErrors, pageErrors } = await watchedPage(context);
  await page.goto(`${base}/console`);
  const deadTile = page.getByTestId('tile-dead');
  await deadTile.locator('.tile-value').getByText(String(stats.now.events.dead), { exact: true }).waitFor();
  t.equal(await deadTile.locator('.tile-sub').textContent(), '0 pending', 'the tile shows /v1/stats events.dead and events.pending');

  await page.getByRole('tab', { name: 'Dead events' }).click();
  const list = page.getByTestId('dead-events');
  const row = (id: string) => list.locator(`table:not([data-testid=redelivered]) tr[data-event="${id}"]`);
  await row(firstId).waitFor();
  await row(secondId).waitFor();
  t.match((await row(firstId).innerText()).replace(/\s+/g, ' '), new RegExp(`callback\\.unmatched ${first} .*dead ${receiver.url}/hooks · \\d+ attempts .*HTTP 500`));
  t.equal(await list.getByTestId('dead-cut').count(), 0, 'the scan was not cut');

  // One event.
  await row(firstId).getByRole('button', { name: 'Redeliver' }).click();
  await receiver.waitFor((r) => r.json.id === firstId && r.headers['webhook-id'] === firstId);
  const redelivered = list.getByTestId('redelivered');
  await redelivered.locator(`tr[data-event="${firstId}"] .delivery-delivered`).waitFor();
  await row(firstId).waitFor({ state: 'detached' });
  t.pass('the redelivered event shows as delivered and has left the dead list');
  t.equal((await app.inject({ url: `/v1/events/${firstId}` })).json().deliveries[0].status, 'delivered', 'and so says the API');

  // Everything still dead (the other event), after a confirmation.
  await list.getByRole('button', { name: 'Redeliver all dead events' }).click();
  await list.getByRole('button', { name: 'Yes, redeliver every dead delivery' }).click();
  await list.getByText('1 dead delivery queued again.').waitFor();
  await redelivered.locator(`tr[data-event="${secondId}"] .delivery-delivered`).waitFor();
  await list.getByText('None.').waitFor();
  t.ok(receiver.received.some((r) => r.json.id === secondId && r.json.data.customerUuid === second), 'the receiver got the second event');
  t.same((await app.inject({ url: '/v1/stats' })).json().now.events, { pending: 0, dead: 0, oldestPendingAgeS: null });

  t.same(pageErrors.map(String), [], 'no uncaught error');
  t.same(consoleErrors.map((m) => m.text()), [], 'no console error');
  await page.close();
});
