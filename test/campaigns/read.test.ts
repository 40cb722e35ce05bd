import { sql } from 'kysely';
import t from 'tap';
import { purgePass } from '../../src/retention/sweep.js';
import { buildTestApp } from '../helpers/app.js';
import { freshDatabase } from '../helpers/database.js';
import { postCallback, resultBody } from '../callbacks/fixtures.js';
import { ADMIN_KEY, post as adminPost } from '../personal-data/fixtures.js';
import { cpfOf, get, line, markForwarded, ndjson, requestsOf, upload, holdTheProvider } from './fixtures.js';

// A campaign's progress, results, cancellation and lifetime, read through the API.

const database = await freshDatabase(t);
const gw = await buildTestApp(t, { database, env: { ADMIN_API_KEYS: ADMIN_KEY } });
// Nothing is forwarded here: the requests stay as uploaded (markForwarded plays the forwarder).
await holdTheProvider(database.db);
const { app } = gw;

/** Uploads `n` lines of customers `${name}-<i>` and answers the campaign id. */
async function campaignOf(name: string, n: number, first = 0): Promise<string> {
  const res = await upload(app, ndjson(Array.from({ length: n }, (_, i) => line(`${name}-${i}`, first + i))));
  if (res.statusCode !== 202) throw new Error(res.body);
  return res.json().id;
}

t.test('progress: requests by status and decision, the rate of the last minute and the time left at it', async (t) => {
  const id = await campaignOf('prog', 6, 100);
  let view = (await get(app, `/v1/campaigns/${id}`)).json();
  t.match(view, { id, status: 'running', accepted: 6, rejectedTotal: 0, ratePerS: 0, etaS: null, uploadError: null });
  t.same(view.counts, { queued: 6, submitting: 0, submitted: 0, completed: 0, submit_failed: 0, expired: 0, cancelled: 0, approved: 0, declined: 0, filtered: 0, no_score: 0 });

  // Three forwarded (the forwarder's work, here in SQL), two of them answered by the provider.
  await sql`update underwriting_requests set status = 'submitted', queued_body = null, submitted_at = now()
    where customer_uuid in ('prog-0', 'prog-1', 'prog-2')`.execute(database.db);
  t.equal((await postCallback(app, resultBody('prog-0', { limit: 5000 }))).statusCode, 200);
  t.equal((await postCallback(app, resultBody('prog-1', { score: -1, costSavingEnabled: true }))).statusCode, 200);
  view = (await get(app, `/v1/campaigns/${id}`)).json();
  t.match(view.counts, { queued: 3, submitted: 1, completed: 2, approved: 1, filtered: 1, declined: 0 });
  t.ok(view.ratePerS > 0, `forwarded in the last minute: ${view.ratePerS}/s`);
  t.equal(view.etaS, null, 'no estimate while the provider is held: the last minute\'s rate is not going on');
  t.equal(view.status, 'running');
  // The circuit open: no estimate either.
  await sql`update provider_pacing set hold_until = '-infinity', open_until = now() + interval '1 day'`.execute(database.db);
  t.equal((await get(app, `/v1/campaigns/${id}`)).json().etaS, null, 'none while the circuit is open');
  // Forwarding going on (here: every call slot held by calls in flight, so that this test's forwarder sends nothing).
  await sql`update provider_slots set lease_until = now() + interval '1 day'`.execute(database.db);
  await sql`update provider_pacing set open_until = null`.execute(database.db);
  view = (await get(app, `/v1/campaigns/${id}`)).json();
  t.equal(view.etaS, Math.ceil(3 / view.ratePerS), 'the queued ones at that rate');
  await holdTheProvider(database.db);
  await sql`update provider_slots set lease_until = '-infinity'`.execute(database.db);

  await markForwarded(database.db, id);
  for (const i of [2, 3, 4, 5]) t.equal((await postCallback(app, resultBody(`prog-${i}`, { limit: 0 }))).statusCode, 200);
  view = (await get(app, `/v1/campaigns/${id}`)).json();
  t.match(view, { status: 'done', etaS: 0 });
  t.match(view.counts, { queued: 0, completed: 6, approved: 1, filtered: 1, declined: 4 });
  const listed = (await get(app, '/v1/campaigns')).json().items.find((c: { id: string }) => c.id === id);
  t.equal(listed.status, 'done');
});

t.test('results stream in file order as CSV (default) or NDJSON, masked CPFs only', async (t) => {
  const id = await campaignOf('res', 3, 200);
  await markForwarded(database.db, id);
  t.equal((await postCallback(app, resultBody('res-1', { score: 640, riskBand: 2, limit: 3000 }))).statusCode, 200);

  const csv = await get(app, `/v1/campaigns/${id}/results`);
  t.equal(csv.statusCode, 200);
  t.match(csv.headers['content-type'], /^text\/csv/);
  t.match(csv.headers['content-disposition'], `attachment; filename="${id}-results.csv"`);
  const rows = csv.body.trimEnd().split('\r\n');
  t.equal(rows[0], 'customerUuid,status,decision,score,riskBand,limit,cpfMasked,completedAt');
  t.equal(rows.length, 4);
  t.match(rows[1], /^res-0,submitted,,,,,\*\*\*\.\d{3}\.\d{3}-\*\*,$/);
  t.match(rows[2], /^res-1,completed,approved,640,2,3000,\*\*\*\.\d{3}\.\d{3}-\*\*,\d{4}-\d\d-\d\dT/);

  const nd = await get(app, `/v1/campaigns/${id}/results`, { accept: 'application/x-ndjson' });
  t.match(nd.headers['content-type'], /^application\/x-ndjson/);
  const lines = nd.body.trimEnd().split('\n').map((l) => JSON.parse(l));
  t.same(lines.map((l) => l.customerUuid), ['res-0', 'res-1', 'res-2']);
  t.match(lines[1], { status: 'completed', decision: 'approved', score: 640, riskBand: 2, limit: 3000, cpfMasked: /^\*\*\*\./ });
  t.same(Object.keys(lines[0]), ['customerUuid', 'status', 'decision', 'score', 'riskBand', 'limit', 'cpfMasked', 'completedAt']);
  for (const body of [csv.body, nd.body]) for (const i of [200, 201, 202]) t.notMatch(body, cpfOf(i), 'no full CPF');
  // The Accept header's q-values decide, not the mere mention of a type.
  for (const [accept, type] of [
    ['application/x-ndjson;q=0.1, text/csv', 'text/csv'],
    ['text/csv;q=0.5, application/x-ndjson', 'application/x-ndjson'],
    ['application/x-ndjson;q=0', 'text/csv'],
    ['*/*', 'text/csv'],
    // The most specific range decides a type's q: text/csv's own 0.1, not the wildcard's 1.
    ['application/x-ndjson;q=0.5, text/csv;q=0.1, */*', 'application/x-ndjson'],
  ] as const) {
    t.match((await get(app, `/v1/campaigns/${id}/results`, { accept })).headers['content-type'], new RegExp(`^${type.replace('/', '\\/')}`), accept);
  }
  t.equal((await get(app, `/v1/campaigns/${id}/results?format=ndjson`)).body, nd.body, '?format= says the same');
});

t.test('results of more rows than a page are streamed whole, page by page', async (t) => {
  const id = await campaignOf('page', 2500, 10_000);
  const res = await get(app, `/v1/campaigns/${id}/results?format=ndjson`);
  const lines = res.body.trimEnd().split('\n');
  t.equal(lines.length, 2500);
  t.equal(JSON.parse(lines[2499]!).customerUuid, 'page-2499');
  t.equal(new Set(lines.map((l) => JSON.parse(l).customerUuid)).size, 2500, 'each once');
});

t.test('cancel: every queued request ends cancelled (its sealed body cleared, its event recorded); forwarded ones go on', async (t) => {
  const id = await campaignOf('cxl', 4, 400);
  await sql`update underwriting_requests set status = 'submitted', queued_body = null where customer_uuid = 'cxl-0'`.execute(database.db);
  const res = await app.inject({ method: 'POST', url: `/v1/campaigns/${id}/cancel` });
  t.equal(res.statusCode, 202);
  t.same(res.json(), { id, status: 'cancelled', cancelled: 3 });
  const rows = await requestsOf(database.db, id);
  t.same(rows.map((r) => r.status), ['submitted', 'cancelled', 'cancelled', 'cancelled']);
  t.ok(rows.every((r) => r.queued_body === null));
  const { rows: events } = await sql<{ n: number }>`select count(*)::int as n from events
    where type = 'underwriting.cancelled' and customer_uuid like 'cxl-%'`.execute(database.db);
  t.equal(Number(events[0]!.n), 3, 'one underwriting.cancelled event each');
  const view = (await get(app, `/v1/campaigns/${id}`)).json();
  t.match(view, { status: 'cancelled', counts: { cancelled: 3, submitted: 1, queued: 0 } });
  t.ok(view.cancelledAt);
  const again = await app.inject({ method: 'POST', url: `/v1/campaigns/${id}/cancel` });
  t.same(again.json(), { id, status: 'cancelled', cancelled: 0 }, 'cancelling again ends nothing more');
  const resubmit = await upload(app, ndjson([line('cxl-1', 401), line('cxl-0', 400)]));
  t.same(resubmit.json().rejected.map((r: { line: number }) => r.line), [2], 'a cancelled customer may be sent again; one in flight may not');
});

t.test('unknown campaigns are 404 not_found; malformed ids 400', async (t) => {
  const unknown = `cmp_${'0'.repeat(32)}`;
  for (const [method, url] of [
    ['GET', `/v1/campaigns/${unknown}`],
    ['GET', `/v1/campaigns/${unknown}/results`],
    ['POST', `/v1/campaigns/${unknown}/cancel`],
  ] as const) {
    const res = await app.inject({ method, url });
    t.equal(res.statusCode, 404, url);
    t.equal(res.json().error, 'not_found');
  }
  const bad = await get(app, '/v1/campaigns/nope');
  t.equal(bad.statusCode, 400);
  t.equal(bad.json().error, 'validation_failed');
  t.equal((await get(app, '/v1/campaigns?limit=0')).statusCode, 400);
  t.equal((await get(app, '/v1/campaigns?cursor=forged.AAAAAAAAAAAAAAAAAAAAAA')).statusCode, 400);
});

t.test('the list: newest first, paged by cursor', async (t) => {
  const ids = [await campaignOf('list-a', 1, 500), await campaignOf('list-b', 1, 501), await campaignOf('list-c', 1, 502)];
  const first = (await get(app, '/v1/campaigns?limit=2')).json();
  t.same(first.items.map((c: { id: string }) => c.id), [ids[2], ids[1]]);
  t.match(first.items[0], { status: 'running', source: 'ndjson', accepted: 1, rejectedTotal: 0 });
  const second = (await get(app, `/v1/campaigns?limit=2&cursor=${encodeURIComponent(first.nextCursor)}`)).json();
  t.equal(second.items[0].id, ids[0]);
});

t.test("erasure takes a campaign's request like any other; the campaign's results no longer list it", async (t) => {
  const id = await campaignOf('erase', 2, 600);
  await app.inject({ method: 'POST', url: `/v1/campaigns/${id}/cancel` });
  const erased = await adminPost(app, '/v1/personal-data/erase', { cpf: cpfOf(600) });
  t.equal(erased.statusCode, 200, erased.body);
  t.equal(erased.json().erased.requests, 1);
  const results = (await get(app, `/v1/campaigns/${id}/results?format=ndjson`)).body.trimEnd().split('\n');
  t.same(results.map((l) => JSON.parse(l).customerUuid), ['erase-1']);
});

t.test('retention purges a campaign once its requests are gone, never before', async (t) => {
  const id = await campaignOf('old', 1, 700);
  await app.inject({ method: 'POST', url: `/v1/campaigns/${id}/cancel` });
  const past = new Date(Date.now() - 40 * 86400_000);
  await sql`update campaigns set created_at = ${past}, updated_at = ${past} where public_id = ${id}`.execute(database.db);
  await sql`update underwriting_requests set submitted_at = ${past}, updated_at = ${new Date()} where customer_uuid = 'old-0'`.execute(database.db);
  let purged = await purgePass(database.db, new Date(), 30);
  t.equal(purged.campaigns, 0, 'its request is recent (changed lately): the campaign stays');
  await sql`update underwriting_requests set updated_at = ${past} where customer_uuid = 'old-0'`.execute(database.db);
  purged = await purgePass(database.db, new Date(), 30);
  t.equal(purged.underwriting_requests, 1);
  t.equal(purged.campaigns, 1, 'then the campaign goes with it');
  t.equal((await get(app, `/v1/campaigns/${id}`)).statusCode, 404);
});
