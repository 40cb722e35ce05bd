import t from 'tap';
import { markSubmitFailed } from '../../src/requests/sql.js';
import { buildTestApp } from '../helpers/app.js';
import { freshDatabase } from '../helpers/database.js';
import { customer, insertRequest, postCallback, resultBody } from '../callbacks/fixtures.js';
import { submitGateway, validRequest } from '../submissions/fixtures.js';
import { getJson, pushEnv, webhookSecret } from './fixtures.js';
import { until } from '../helpers/until.js';
import { startReceiver } from './receiver.js';

// Every change of a request's state has its event, written in the statement that makes the change.

const shared = await freshDatabase(t);

/** The request as GET returns it, without history and unmatched: what an event's data must be. */
async function requestView(app: Awaited<ReturnType<typeof buildTestApp>>['app'], customerUuid: string) {
  const { body } = await getJson(app, `/v1/underwritings/${customerUuid}`);
  const { history: _h, unmatched: _u, ...request } = body;
  return request;
}

t.test('a submit the provider refuses is pushed as underwriting.submit_failed, its data the request as GET shows it', async (t) => {
  const receiver = await startReceiver(t);
  const { submit, app } = await submitGateway(t, {
    database: shared,
    env: pushEnv([receiver.url], webhookSecret()),
    handler: (_received, res) => void res.writeHead(500).end('{"error":"boom"}'),
  });
  await app.ready();
  const body = validRequest({ customerUuid: customer('refused') });
  t.equal((await submit(body)).statusCode, 502);
  const [got] = await receiver.count(1);
  t.equal(got!.json.type, 'underwriting.submit_failed');
  t.match(got!.json.data, { customerUuid: body.customerUuid, status: 'submit_failed', upstreamStatus: 500, result: null });
  t.same(got!.json.data, await requestView(app, body.customerUuid));
  t.notMatch(got!.body, body.cpf, 'never the CPF, only its masked form');
});

t.test('the expiry sweep pushes underwriting.expired; a late callback then pushes underwriting.completed, in that order', async (t) => {
  const receiver = await startReceiver(t);
  const { app } = await buildTestApp(t, { database: shared, env: pushEnv([receiver.url], webhookSecret(), { CALLBACK_TIMEOUT_S: '1' }) });
  await app.ready();
  const cust = customer('expires');
  await insertRequest(shared.db, { customerUuid: cust, status: 'submitted', submittedAt: new Date(Date.now() - 10_000) });
  await receiver.waitFor((r) => r.json.data.customerUuid === cust);
  const expired = receiver.received.filter((r) => r.json.data.customerUuid === cust);
  t.same(expired.map((r) => r.json.type), ['underwriting.expired']);
  t.match(expired[0]!.json.data, { status: 'expired', result: null, completedAt: null });
  t.same(expired[0]!.json.data, await requestView(app, cust));

  await postCallback(app, resultBody(cust));
  await receiver.waitFor((r) => r.json.data.customerUuid === cust && r.json.type === 'underwriting.completed');
  // At least once: a retry may repeat an event (PGlite shares this thread), never reorder them.
  const firstArrivals = [...new Map(receiver.received.filter((r) => r.json.data.customerUuid === cust).map((r) => [r.json.id, r.json.type])).values()];
  t.same(firstArrivals, ['underwriting.expired', 'underwriting.completed']);
  const feed = await getJson(app, `/v1/events?customerUuid=${cust}`);
  t.same(feed.body.items.map((e: { type: string }) => e.type), ['underwriting.expired', 'underwriting.completed'], 'the feed, oldest first');
});

t.test('a failed submit that a callback already completed changes nothing and has no submit_failed event', async (t) => {
  const { app } = await buildTestApp(t, { database: shared });
  const cust = customer('overtaken');
  const id = await insertRequest(shared.db, { customerUuid: cust, status: 'submitting' });
  await postCallback(app, resultBody(cust));
  t.equal(await markSubmitFailed(shared.db, id, { upstreamStatus: null, error: 'timed out' }, new Date()), false);
  const events = await shared.db.selectFrom('events').select('type').where('customer_uuid', '=', cust).execute();
  t.same(events.map((e) => e.type), ['underwriting.completed']);
});

t.test('a feed long-poll is woken by an expiry, not only by callbacks', async (t) => {
  const { app } = await buildTestApp(t, { database: shared, env: { CALLBACK_TIMEOUT_S: '1' } });
  await app.ready();
  const cust = customer('woken');
  const polling = getJson(app, `/v1/events?customerUuid=${cust}&wait=20`);
  await until(async () => (/underwriting_event_feed_waiters 1/.test((await app.inject({ method: 'GET', url: '/metrics' })).body) ? true : undefined));
  const asked = Date.now();
  await insertRequest(shared.db, { customerUuid: cust, status: 'submitted', submittedAt: new Date(Date.now() - 10_000) });
  const page = await polling;
  t.same(page.body.items.map((e: { type: string }) => e.type), ['underwriting.expired']);
  t.ok(Date.now() - asked < 10_000, `answered ${Date.now() - asked} ms after the request became overdue`);
});
