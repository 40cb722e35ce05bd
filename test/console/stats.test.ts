import t from 'tap';
import { buildTestApp, listen } from '../helpers/app.js';
import { ensureConsoleBuilt, launchBrowser, watchedPage } from '../helpers/browser.js';
import { customer, postCallback, resultBody } from '../callbacks/fixtures.js';
import { pushEnv, webhookSecret } from '../events/fixtures.js';
import { until } from '../helpers/until.js';
import { startReceiver } from '../events/receiver.js';
import { hoursAgo, insertRow, insertStray } from '../stats/fixtures.js';

// The console against the real statistics and callbacks routes, in a real headless Chromium.

const context = await (async () => {
  await ensureConsoleBuilt();
  return launchBrowser(t);
})();

t.test('the tiles show the figures /v1/stats gives, and an invalid callback opens with its CPF masked', async (t) => {
  const { app, database } = await buildTestApp(t);
  const now = Date.now();
  await insertRow(database.db, { status: 'submitted', submittedAt: new Date(now - 90_000) });
  await insertRow(database.db, { status: 'submitting', submittedAt: new Date(now - 5_000) });
  await insertRow(database.db, { status: 'completed', submittedAt: new Date(now - 3600_000), turnaroundMs: 4000 });
  for (let i = 0; i < 3; i++) await insertStray(database.db, 'unmatched', new Date(now - (i + 1) * 60_000));
  await insertStray(database.db, 'invalid', new Date(now - 30_000), {
    rawBody: '{"customerUuid":"c-raw","cpf":"529.982.247-25"}',
    customerUuid: 'c-raw',
    error: 'response: required',
  });
  const api = (await app.inject({ url: '/v1/stats' })).json();
  t.match(api.now, { pending: 2, unmatched24h: 3, invalid24h: 1 });

  const base = await listen(app);
  const { page, requests, notFound } = await watchedPage(context);
  await page.goto(`${base}/console`);
  const tile = (id: string) => page.getByTestId(`tile-${id}`).locator('.tile-value');
  await tile('pending').getByText(String(api.now.pending), { exact: true }).waitFor();
  t.equal(await tile('unmatched').textContent(), String(api.now.unmatched24h));
  t.equal(await tile('invalid').textContent(), String(api.now.invalid24h));
  t.equal(await tile('token').textContent(), 'not configured');
  t.ok(requests.some((r) => new URL(r.url()).pathname === '/v1/stats'), 'the page read /v1/stats');
  t.notOk(notFound.includes('/v1/stats') || notFound.includes('/v1/callbacks'), 'both routes answered');

  await page.getByTestId('callbacks-unmatched').locator('tbody tr').nth(2).waitFor();
  t.equal(await page.getByTestId('callbacks-unmatched').locator('tbody tr').count(), 3, 'the unmatched list');
  await page.getByRole('tab', { name: 'Invalid callbacks' }).click();
  const invalid = page.getByTestId('callbacks-invalid');
  await invalid.getByText('response: required').waitFor();
  await invalid.getByRole('button', { name: 'View raw body' }).click();
  const raw = await invalid.locator('pre.raw-body').innerText();
  t.match(raw, /"customerUuid":"c-raw"/);
  t.notMatch(raw, /529|982|247/, 'the CPF is masked in the view');
  await page.close();
});

t.test('the charts show the decisions and turnaround percentiles /v1/stats gives for each bucket', async (t) => {
  // Pushing to a receiver that always fails, so an unmatched callback's event goes dead for real.
  const receiver = await startReceiver(t, () => 500);
  const { app, database } = await buildTestApp(t, { env: pushEnv([receiver.url], webhookSecret(), { EVENT_RETRY_HORIZON_S: '1' }) });
  await app.ready();
  const now = new Date();
  // A day of traffic, varied but fixed: bucket h (hours ago) has 1 + (h * 7) % 5 completed requests.
  const decisions = ['approved', 'approved', 'declined', 'approved', 'filtered', 'no_score', 'declined'] as const;
  let n = 0;
  for (let h = 1; h <= 22; h++) {
    for (let k = 0; k <= (h * 7) % 5; k++, n++) {
      const turnaroundMs = 3000 + ((n * 7919) % 40) * 1000 + (h % 4) * 9000;
      await insertRow(database.db, { status: 'completed', submittedAt: hoursAgo(now, h + k / 10), decision: decisions[n % decisions.length], turnaroundMs });
    }
    if (h % 6 === 0) await insertRow(database.db, { status: 'expired', submittedAt: hoursAgo(now, h) });
  }
  for (const m of [2, 7, 40]) await insertRow(database.db, { status: 'submitted', submittedAt: new Date(now.getTime() - m * 60_000) });
  for (const m of [25, 180]) await insertStray(database.db, 'unmatched', new Date(now.getTime() - m * 60_000));
  await insertStray(database.db, 'invalid', new Date(now.getTime() - 50 * 60_000), { rawBody: '{"customerUuid":"c-bad","response":{}}', customerUuid: 'c-bad' });
  t.equal((await postCallback(app, resultBody(customer('stray')))).statusCode, 200, 'an unmatched callback, through the route');
  await until(async () => ((await app.inject({ url: '/v1/stats' })).json().now.events.dead === 1 ? true : undefined));

  const base = await listen(app);
  const { page, requests, consoleErrors } = await watchedPage(context);
  const answered = page.waitForResponse((r) => new URL(r.url()).pathname === '/v1/stats');
  await page.goto(`${base}/console`);
  // The figures, asked of the API with the very range the page asked for.
  const asked = new URL((await answered).url());
  const api = (await app.inject({ url: `/v1/stats${asked.search}` })).json();
  const buckets: any[] = api.buckets;
  const filled = buckets.map((b, i) => ({ b, i })).filter(({ b }) => b.completed > 0);
  t.ok(filled.length >= 22, `${filled.length} buckets with completed requests`);
  t.equal(
    filled.reduce((sum, { b }) => sum + b.completed, 0),
    n,
    'every completed request counted',
  );
  t.ok(requests.some((r) => r.url() === asked.href));

  const charts = page.getByTestId('charts').locator('.chart');
  await charts.nth(1).locator('.u-over').waitFor();
  await page.getByTestId('tile-dead').locator('.tile-value').getByText('1', { exact: true }).waitFor();
  await page.getByTestId('callbacks-unmatched').locator('tbody tr').nth(2).waitFor();
  if (process.env.CONSOLE_SCREENSHOT) await page.screenshot({ path: process.env.CONSOLE_SCREENSHOT, fullPage: true });

  const locale = String(await page.evaluate('navigator.language'));
  const seconds = (ms: number) => new Intl.NumberFormat(locale).format(ms / 1000);
  /** Hovers bucket i of a chart and reads its legend: label -> value. */
  const legendAt = async (chart: number, i: number) => {
    const over = charts.nth(chart).locator('.u-over');
    const box = (await over.boundingBox())!;
    await page.mouse.move(box.x + (box.width * i) / (buckets.length - 1), box.y + box.height / 2);
    return charts.nth(chart).evaluate((el) =>
      Object.fromEntries(
        [...el.querySelectorAll('.u-legend .u-series')].slice(1).map((row) => [row.querySelector('.u-label')?.textContent, row.querySelector('.u-value')?.textContent]),
      ),
    );
  };
  for (const { b, i } of filled) {
    const decisions = await legendAt(0, i);
    t.same(
      decisions,
      Object.fromEntries(['approved', 'declined', 'filtered', 'no_score'].map((d) => [d, String(b.decisions[d])])),
      `decisions of the bucket at ${b.start}`,
    );
    const turnaround = await legendAt(1, i);
    t.same(turnaround, { p50: seconds(b.turnaroundMs.p50), p95: seconds(b.turnaroundMs.p95) }, `turnaround of the bucket at ${b.start}`);
  }
  t.same(consoleErrors.map((m) => m.text()), [], 'no console error');
  await page.close();
});
