import t from 'tap';
import { buildTestApp, listen } from '../helpers/app.js';
import { ensureConsoleBuilt, launchBrowser, watchedPage } from '../helpers/browser.js';
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
  const { app, database } = await buildTestApp(t);
  const now = new Date();
  const completed = [
    { hours: 3, decision: 'approved', turnaroundMs: 4000 },
    { hours: 3, decision: 'approved', turnaroundMs: 6000 },
    { hours: 3, decision: 'declined', turnaroundMs: 8000 },
    { hours: 1, decision: 'filtered', turnaroundMs: 2000 },
    { hours: 1, decision: 'no_score', turnaroundMs: 30_000 },
  ] as const;
  for (const c of completed) {
    await insertRow(database.db, { status: 'completed', submittedAt: hoursAgo(now, c.hours), decision: c.decision, turnaroundMs: c.turnaroundMs });
  }
  await insertRow(database.db, { status: 'submitted', submittedAt: hoursAgo(now, 2) });

  const base = await listen(app);
  const { page, requests, consoleErrors } = await watchedPage(context);
  const answered = page.waitForResponse((r) => new URL(r.url()).pathname === '/v1/stats');
  await page.goto(`${base}/console`);
  // The figures, asked of the API with the very range the page asked for.
  const asked = new URL((await answered).url());
  const api = (await app.inject({ url: `/v1/stats${asked.search}` })).json();
  const buckets: any[] = api.buckets;
  const filled = buckets.map((b, i) => ({ b, i })).filter(({ b }) => b.completed > 0);
  t.equal(filled.length, 2, 'two buckets with completed requests');
  t.same(filled.map(({ b }) => b.completed), [3, 2]);
  t.ok(requests.some((r) => r.url() === asked.href));

  const charts = page.getByTestId('charts').locator('.chart');
  await charts.nth(1).locator('.u-over').waitFor();
  const locale = await page.evaluate(() => navigator.language);
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
  t.match(filled[0]!.b.decisions, { approved: 2, declined: 1 });
  t.same(consoleErrors.map((m) => m.text()), [], 'no console error');
  await page.close();
});
