import t from 'tap';
import { buildTestApp, listen } from '../helpers/app.js';
import { ensureConsoleBuilt, launchBrowser, watchedPage } from '../helpers/browser.js';
import { insertRow, insertStray } from '../stats/fixtures.js';

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
