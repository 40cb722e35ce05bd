import { sql } from 'kysely';
import t from 'tap';
import { customer, postCallback, resultBody } from '../callbacks/fixtures.js';
import { pushEnv, webhookSecret } from '../events/fixtures.js';
import { until } from '../helpers/until.js';
import { startReceiver } from '../events/receiver.js';
import { buildTestApp, listen } from '../helpers/app.js';
import { ensureConsoleBuilt, launchBrowser, watchedPage } from '../helpers/browser.js';
import type { Kysely } from 'kysely';
import type { Tables } from '../../src/db/types.js';

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
  t.match((await row(firstId).innerText()).replace(/\s+/g, ' '), new RegExp(`callback\\.unmatched ${first} .*dead ${receiver.url}/hooks · \\d+ attempts? .*HTTP 500`));
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

/** `count` callback.unmatched events in one statement, each with one delivery of `status` (none when null). */
async function insertEvents(database: { db: Kysely<Tables> }, count: number, status: 'dead' | null): Promise<string[]> {
  const { rows } = await sql<{ public_id: string }>`
    with made as (
      insert into events (public_id, type, customer_uuid, created_at, data)
      select 'evt_' || replace(gen_random_uuid()::text, '-', ''), 'callback.unmatched', 'bulk-' || n, now(),
             jsonb_build_object('customerUuid', 'bulk-' || n, 'receivedAt', '2026-11-22T03:00:00.000Z', 'result', null)
      from generate_series(1, ${count}::int) as n
      returning id, customer_uuid, public_id),
    delivered as (
      insert into event_deliveries (event_id, customer_uuid, url_key, url, status, attempts, queued_at, next_attempt_at)
      select id, customer_uuid, 'key', 'http://127.0.0.1:9/hooks', ${status ?? 'dead'}, 3, now(), now() from made
      where ${status !== null})
    select public_id from made order by id`.execute(database.db);
  return rows.map((r) => r.public_id);
}

t.test('the dead list is read from the feed at most 20 pages deep, and says so when the scan was cut', async (t) => {
  const { app, database } = await buildTestApp(t);
  const [oldest] = await insertEvents(database, 1, 'dead');
  await insertEvents(database, 10_000, null);
  const [newest] = await insertEvents(database, 1, 'dead');
  t.equal((await app.inject({ url: '/v1/stats' })).json().now.events.dead, 2);

  const base = await listen(app);
  const { page, requests } = await watchedPage(context);
  await page.goto(`${base}/console`);
  await page.getByTestId('tile-dead').locator('.tile-value').getByText('2', { exact: true }).waitFor();
  await page.getByRole('tab', { name: 'Dead events' }).click();
  const list = page.getByTestId('dead-events');
  await list.getByTestId('dead-cut').getByText('the oldest 10000 events (20 pages)').waitFor();
  t.equal(await list.locator(`tr[data-event="${oldest}"]`).count(), 1, 'the dead event within reach is listed');
  t.equal(await list.locator(`tr[data-event="${newest}"]`).count(), 0, 'the one beyond it is not');
  t.equal(requests.filter((r) => new URL(r.url()).pathname === '/v1/events').length, 20, 'twenty pages, no more');
  await page.close();
});

t.test('the dead-event scan stops once it has found as many dead deliveries as /v1/stats counts', async (t) => {
  const { app, database } = await buildTestApp(t);
  const [dead] = await insertEvents(database, 1, 'dead');
  await insertEvents(database, 1_200, null);
  const base = await listen(app);
  const { page, requests } = await watchedPage(context);
  await page.goto(`${base}/console`);
  await page.getByTestId('tile-dead').locator('.tile-value').getByText('1', { exact: true }).waitFor();
  await page.getByRole('tab', { name: 'Dead events' }).click();
  await page.getByTestId('dead-events').locator(`tr[data-event="${dead}"]`).waitFor();
  t.equal(requests.filter((r) => new URL(r.url()).pathname === '/v1/events').length, 1, 'one page of the three');
  t.equal(await page.getByTestId('dead-cut').count(), 0);
  await page.close();
});
