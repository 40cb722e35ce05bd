import { readFile } from 'node:fs/promises';
import t from 'tap';
import { buildTestApp, listen } from '../helpers/app.js';
import { ensureConsoleBuilt, launchBrowser, watchedPage } from '../helpers/browser.js';
import { postCallback, resultBody } from '../callbacks/fixtures.js';
import { cpfOf, holdTheProvider, line, markForwarded, ndjson, upload } from '../campaigns/fixtures.js';

// The console's campaigns, in a real headless Chromium against a real gateway and database.

const KEY = 'console-campaign-key-0123456789ab';

const context = await (async () => {
  await ensureConsoleBuilt();
  return launchBrowser(t);
})();

t.test('the campaigns list opens a campaign: progress, decisions, rejected lines by number, results, cancel', async (t) => {
  const { app, database } = await buildTestApp(t, { env: { QUERY_API_KEYS: KEY } });
  await holdTheProvider(database.db);
  const auth = { authorization: `Bearer ${KEY}` };
  const done = await upload(app, ndjson([line('con-a', 1), line('con-b', 2)]), undefined, auth);
  t.equal(done.statusCode, 202);
  await markForwarded(database.db, done.json().id);
  t.equal((await postCallback(app, resultBody('con-a', { limit: 7000 }))).statusCode, 200);
  const running = await upload(app, ndjson([line('con-c', 3), '{"customerUuid": "con-x"}', line('con-d', 4)]), undefined, auth);
  t.equal(running.statusCode, 202);
  const base = await listen(app);

  const { page, requests, pageErrors } = await watchedPage(context);
  await page.goto(`${base}/console`);
  await page.getByLabel('Key').fill(KEY);
  await page.getByRole('button', { name: 'Use key' }).click();
  const list = page.getByTestId('campaign-list');
  await list.locator('tbody tr').nth(1).waitFor();
  t.match(await list.locator('tbody tr').nth(0).innerText(), new RegExp(`${running.json().id}.*running.*2.*1.*NDJSON`, 's'), 'newest first');

  await list.getByRole('button', { name: done.json().id }).click();
  const campaign = page.getByTestId('campaign');
  await campaign.getByTestId('campaign-figures').getByText('1 of 2 settled (50%)').waitFor();
  t.equal(await campaign.getByTestId('campaign-progress').getAttribute('value'), '1');
  t.match(await campaign.getByTestId('campaign-counts').innerText(), /1\s+1\s+0\s+0\s+0/, 'completed 1, approved 1');

  // Results, downloaded with the key (a plain link could not carry it).
  const [download] = await Promise.all([page.waitForEvent('download'), campaign.getByRole('button', { name: 'Download results (CSV)' }).click()]);
  t.equal(download.suggestedFilename(), `${done.json().id}-results.csv`);
  const csv = await readFile((await download.path())!, 'utf8');
  t.match(csv, /^customerUuid,status,decision,score,riskBand,limit,cpfMasked,completedAt\r\ncon-a,completed,approved,712\.5,3,7000,\*\*\*\./);
  t.notMatch(csv, cpfOf(1));
  const resultsCall = requests.find((r) => new URL(r.url()).pathname.endsWith('/results'));
  t.equal(resultsCall?.headers().authorization, `Bearer ${KEY}`);

  await campaign.getByRole('button', { name: 'Close' }).click();
  await list.getByRole('button', { name: running.json().id }).click();
  const rejected = page.getByTestId('campaign-rejected');
  await rejected.waitFor();
  t.match(await rejected.locator('tbody tr').first().innerText(), /^2\s+cpf/, 'line 2, by number, with its field');
  await campaign.getByRole('button', { name: 'Cancel campaign…' }).click();
  await campaign.getByRole('button', { name: 'Cancel 2 queued requests' }).click();
  await campaign.getByTestId('campaign-said').getByText('Cancelled: 2 queued requests will not be sent.').waitFor();
  await campaign.getByTestId('campaign-status').getByText('cancelled').waitFor();
  t.same(pageErrors.map(String), [], 'no uncaught error');
  await page.close();
});
