import t from 'tap';
import { CPF, insertRequest, OTHER_CPF, distinctResult } from '../queries/fixtures.js';
import { buildTestApp, listen } from '../helpers/app.js';
import { SERVER_URL } from '../helpers/database.js';
import { databaseBehindRelay } from '../helpers/relay.js';
import { ensureConsoleBuilt, launchBrowser, watchedPage } from '../helpers/browser.js';

// The console in a real headless Chromium, against a real gateway on a real database.

const KEY = 'console-test-key-0123456789abcdef';

const context = await (async () => {
  await ensureConsoleBuilt();
  return launchBrowser(t);
})();

t.test('the page loads with no console error and asks nothing of any host but the gateway', async (t) => {
  const { app } = await buildTestApp(t);
  const base = await listen(app);
  const { page, requests, consoleErrors, pageErrors, notFound } = await watchedPage(context);

  const answer = await page.goto(`${base}/console`);
  t.equal(answer?.status(), 200);
  await page.getByTestId('health').getByText('Gateway and database up').waitFor();
  await page.getByText('Latest requests').waitFor();
  await page.waitForLoadState('networkidle');

  t.same(pageErrors.map(String), [], 'no uncaught error');
  const origins = new Set(requests.map((r) => new URL(r.url()).origin));
  t.same([...origins], [base], 'every request went to the gateway itself');
  t.same(notFound, [], 'every route the page reads answered');
  t.same(consoleErrors.map((m) => m.text()), [], 'no console error');
  // The landing page reads the statistics and the unmatched callbacks (events: in a customer's view and the dead list).
  for (const path of ['/v1/stats', '/v1/callbacks']) {
    t.ok(requests.some((r) => new URL(r.url()).pathname === path), `the page asks ${path}`);
  }
  await page.close();
});

t.test('with QUERY_API_KEYS set, the page asks for a key, keeps it for the tab and sends it as a bearer token', async (t) => {
  const { app, database } = await buildTestApp(t, { env: { QUERY_API_KEYS: KEY } });
  await insertRequest(database.db, { customerUuid: 'keyed-customer', submittedAt: '2025-12-31T00:00:00Z', result: distinctResult('keyed-customer') });
  const base = await listen(app);
  const { page, requests } = await watchedPage(context);

  const answer = await page.goto(`${base}/console`);
  t.equal(answer?.status(), 200, 'the page itself needs no key');
  const field = page.getByLabel('Key');
  await field.waitFor();
  t.equal(await field.getAttribute('type'), 'password');

  await field.fill('not-the-key');
  await page.getByRole('button', { name: 'Use key' }).click();
  await page.getByText('The gateway refused that key.').waitFor();

  await page.getByLabel('Key').fill(KEY);
  await page.getByRole('button', { name: 'Use key' }).click();
  await page.getByTestId('recent').getByText('keyed-customer').waitFor();
  t.equal(await page.getByLabel('Key').count(), 0, 'the key form is gone');

  await page.getByRole('textbox', { name: 'customerUuid' }).fill('keyed-customer');
  await page.getByRole('button', { name: 'Find' }).click();
  await page.getByTestId('customer-requests').getByText('approved').waitFor();

  t.equal(await page.evaluate("sessionStorage.getItem('ugw.console.apiKey')"), KEY, 'kept in sessionStorage');
  t.same(await context.cookies(), [], 'no cookies');
  const customerCall = requests.find((r) => new URL(r.url()).pathname === '/v1/underwritings/keyed-customer');
  t.equal(customerCall?.headers().authorization, `Bearer ${KEY}`);
  const readyCalls = requests.filter((r) => new URL(r.url()).pathname === '/readyz');
  t.ok(readyCalls.length > 0);
  await page.close();
});

t.test("finds a customer by customerUuid and shows its requests, results, history and unmatched callbacks", async (t) => {
  const { app, database } = await buildTestApp(t);
  // The older request, answered (declined); the newer one answered through the real callback route.
  await insertRequest(database.db, {
    customerUuid: 'cust-42',
    submittedAt: '2025-12-30T00:00:00Z',
    result: distinctResult('cust-42', { score: 420, limit: 0 }),
  });
  await insertRequest(database.db, { customerUuid: 'cust-42', submittedAt: '2025-12-31T23:00:00Z' });
  for (const body of [distinctResult('cust-42', { score: 780, riskBand: 1, limit: 12000 }), distinctResult('cust-42')]) {
    const res = await app.inject({ method: 'POST', url: '/v1/callbacks/underwriting', payload: body });
    t.equal(res.statusCode, 200, 'the callback is stored');
  }
  const base = await listen(app);
  const { page } = await watchedPage(context);
  await page.goto(`${base}/console`);

  await page.getByRole('textbox', { name: 'customerUuid' }).fill('cust-42');
  await page.getByRole('button', { name: 'Find' }).click();
  const customer = page.getByTestId('customer');
  const rows = page.getByTestId('customer-requests').locator('tbody tr');
  await rows.nth(1).waitFor();
  t.equal(await rows.count(), 2, 'the newest request and one earlier');
  const newest = (await rows.nth(0).innerText()).replace(/\s+/g, ' ');
  t.match(newest, /completed approved \*\*\*\.982\.247-\*\* 780 1 12,000/, 'status, decision, masked CPF, score, risk band, limit');
  t.match((await rows.nth(1).innerText()).replace(/\s+/g, ' '), /completed declined .* 420 2 0 /);

  await customer.getByRole('button', { name: 'View result' }).first().click();
  const result = await customer.locator('pre.raw-body').first().innerText();
  t.match(JSON.parse(result), { customerUuid: 'cust-42', serviceType: 'CREDIT_SCORE', response: { score: 780, limit: 12000 } });

  const unmatched = customer.locator('ul.plain li');
  t.equal(await unmatched.count(), 1, 'the second callback matched nothing');

  await page.getByRole('textbox', { name: 'customerUuid' }).fill('nobody-here');
  await page.getByRole('button', { name: 'Find' }).click();
  await customer.getByText('No request for this customerUuid.').waitFor();
  t.pass('an unknown customer says so');
  await page.close();
});

t.test('finds a customer by CPF through the lookup, the CPF sent only in a POST body', async (t) => {
  const { app, database } = await buildTestApp(t);
  await insertRequest(database.db, { customerUuid: 'cpf-a', cpf: CPF, submittedAt: '2025-12-31T00:00:00Z', result: distinctResult('cpf-a') });
  await insertRequest(database.db, { customerUuid: 'cpf-b', cpf: CPF, submittedAt: '2026-01-01T00:00:00Z' });
  await insertRequest(database.db, { customerUuid: 'cpf-other', cpf: OTHER_CPF });
  const base = await listen(app);
  const { page, requests } = await watchedPage(context);
  await page.goto(`${base}/console`);

  await page.locator('select[name=kind]').selectOption('cpf');
  await page.getByRole('textbox', { name: 'CPF' }).fill('529.982.247-25');
  await page.getByRole('button', { name: 'Find' }).click();
  const found = page.getByTestId('lookup-results');
  await found.getByText('2 requests for that CPF').waitFor();
  const listed = await found.locator('tbody tr').allInnerTexts();
  t.match(listed[0], /^cpf-b/, 'newest first');
  t.match(listed[1], /^cpf-a/);
  t.equal(await page.getByRole('textbox', { name: 'CPF' }).inputValue(), '', 'the CPF does not stay on screen');

  const lookups = requests.filter((r) => new URL(r.url()).pathname === '/v1/underwritings/lookup');
  t.equal(lookups.length, 1, 'one lookup: it is not repeated by the refresh');
  t.equal(lookups[0]?.method(), 'POST');
  t.same(lookups[0]?.postDataJSON(), { cpf: CPF });
  t.notOk(requests.some((r) => r.url().includes(CPF)), 'the CPF is in no URL');

  await found.getByRole('button', { name: 'cpf-a' }).click();
  await page.getByTestId('customer-requests').getByText('approved').waitFor();
  t.pass("the lookup opens the customer's view");
  await page.close();
});

t.test('says the gateway is unreachable when it stops answering', async (t) => {
  const { app } = await buildTestApp(t);
  const base = await listen(app);
  const { page } = await watchedPage(context);
  await page.goto(`${base}/console`);
  await page.getByTestId('health').getByText('Gateway and database up').waitFor();
  await app.close();
  await page.getByRole('button', { name: 'Refresh' }).click();
  await page.getByTestId('health').getByText('The gateway is unreachable').waitFor();
  t.pass('the page says so');
  await page.close();
});

if (SERVER_URL) {
  t.test('says the database is unreachable while it is, and recovers by itself', async (t) => {
    const { database, relay } = await databaseBehindRelay(t);
    const { app } = await buildTestApp(t, { database });
    const base = await listen(app);
    const { page } = await watchedPage(context);
    await page.goto(`${base}/console`);
    const health = page.getByTestId('health');
    await health.getByText('Gateway and database up').waitFor();
    relay.cut();
    await page.getByRole('button', { name: 'Refresh' }).click();
    await health.getByText('The database is unreachable').waitFor();
    relay.restore();
    // No click: the page reads everything again every 2 s while the database is down.
    await health.getByText('Gateway and database up').waitFor({ timeout: 20_000 });
    t.pass('down, then up again');
    await page.close();
  });
}
