import { sql } from 'kysely';
import t from 'tap';
import { buildTestApp } from '../helpers/app.js';
import { freshDatabase } from '../helpers/database.js';
import { parseScrape, sampleValue } from '../helpers/metrics.js';
import { holdTheProvider, line, ndjson, upload } from './fixtures.js';

// Campaigns in /metrics (docs/observability.md): lines read by outcome (this instance), campaigns by
// status (cluster-wide: read from the shared database, the same on every instance).

const database = await freshDatabase(t);
await holdTheProvider(database.db);

async function scrape(app: Awaited<ReturnType<typeof buildTestApp>>['app']) {
  const res = await app.inject({ method: 'GET', url: '/metrics' });
  t.equal(res.statusCode, 200);
  return { text: res.body, samples: parseScrape(res.body) };
}

t.test('lines accepted and rejected are counted; campaigns by status as the API shows them', async (t) => {
  const { app } = await buildTestApp(t, { database });
  const first = await scrape(app);
  t.equal(sampleValue(first.samples, 'underwriting_campaign_lines_total', { outcome: 'accepted' }), 0, 'both series from the first scrape');
  t.equal(sampleValue(first.samples, 'underwriting_campaign_lines_total', { outcome: 'rejected' }), 0);
  for (const status of ['running', 'done', 'cancelled']) t.equal(sampleValue(first.samples, 'underwriting_campaigns', { status }), 0, status);

  // 2 queued; rejected: an invalid line, a customer twice in the file.
  const running = await upload(app, ndjson([line('met-1', 1), line('met-2', 2), { customerUuid: 'met-3' }, line('met-1', 4)]));
  t.equal(running.statusCode, 202, running.body);
  const empty = await upload(app, ndjson([]));
  t.equal(empty.statusCode, 202, empty.body);
  const cancelled = await upload(app, ndjson([line('met-5', 5)]));
  t.equal((await app.inject({ method: 'POST', url: `/v1/campaigns/${cancelled.json().id}/cancel` })).statusCode, 202);

  const { samples } = await scrape(app);
  t.equal(sampleValue(samples, 'underwriting_campaign_lines_total', { outcome: 'accepted' }), 3);
  t.equal(sampleValue(samples, 'underwriting_campaign_lines_total', { outcome: 'rejected' }), 2);
  const byStatus = Object.fromEntries(['running', 'done', 'cancelled'].map((s) => [s, sampleValue(samples, 'underwriting_campaigns', { status: s })]));
  t.same(byStatus, { running: 1, done: 1, cancelled: 1 });
  for (const c of [running, empty, cancelled]) {
    const shown = (await app.inject({ url: `/v1/campaigns/${c.json().id}` })).json().status;
    t.equal(byStatus[shown], 1, `${c.json().id} is ${shown} in the API too`);
  }

  // Its requests end (here as the forwarder and an expiry would leave them): done, in the next scrape.
  await sql`update underwriting_requests set status = 'expired', queued_body = null where status = 'queued'`.execute(database.db);
  const after = (await scrape(app)).samples;
  t.equal(sampleValue(after, 'underwriting_campaigns', { status: 'running' }), 0);
  t.equal(sampleValue(after, 'underwriting_campaigns', { status: 'done' }), 2);
});

t.test('another instance on the same database: the same campaign gauge (cluster-wide, aggregate with max), its own line counters', async (t) => {
  const { app } = await buildTestApp(t, { database });
  const { text, samples } = await scrape(app);
  t.match(text, /^# HELP underwriting_campaigns .*aggregate with max\(\), never sum\(\)$/m);
  t.equal(sampleValue(samples, 'underwriting_campaigns', { status: 'done' }), 2);
  t.equal(sampleValue(samples, 'underwriting_campaign_lines_total', { outcome: 'accepted' }), 0, 'this instance read no line');
});
