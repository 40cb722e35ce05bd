import t from 'tap';
import type { Kysely } from 'kysely';
import type { Tables } from '../../src/db/types.js';
import { freshDatabase } from '../helpers/database.js';
import { submitGateway, validRequest } from '../submissions/fixtures.js';
import { accept } from '../submissions/provider.js';
import { callbacksOf, customer, postCallback, resultBody } from './fixtures.js';

// The submit route and the callback route together, with a real HTTP server as the provider.
// One database for the file (each test has its own customers): a fresh PGlite costs seconds.
const database = await freshDatabase(t);

const requestsOf = (db: Kysely<Tables>, customerUuid: string) =>
  db.selectFrom('underwriting_requests').selectAll().where('customer_uuid', '=', customerUuid).orderBy('id').execute();

t.test('a request submitted through the gateway is completed by its callback', async (t) => {
  const gw = await submitGateway(t, { database });
  const cust = customer('e2e');
  t.equal((await gw.submit(validRequest({ customerUuid: cust }))).statusCode, 202);
  const res = await postCallback(gw.app, resultBody(cust, { limit: 0 }));
  t.equal(res.statusCode, 200);
  const [callback] = await callbacksOf(gw.database.db, cust);
  const [request] = await requestsOf(gw.database.db, cust);
  t.match(callback, { outcome: 'matched', request_id: request!.id, decision: 'declined' });
  t.match(request, { status: 'completed', decision: 'declined', upstream_status: 202, result_callback_id: callback!.id });
});

t.test('a callback that overtakes the provider reply completes the request, and the late reply does not undo it', async (t) => {
  const gw = await submitGateway(t, { database });
  const cust = customer('overtake');
  const delivered: number[] = [];
  // The provider delivers the result before it answers our submit.
  gw.provider.setHandler(async (received, res) => {
    delivered.push((await postCallback(gw.app, resultBody(cust))).statusCode);
    accept(received, res);
  });
  const submitted = await gw.submit(validRequest({ customerUuid: cust }));
  t.equal(submitted.statusCode, 202);
  t.match(submitted.json(), { status: 'submitted', upstreamStatus: 202 });
  t.same(delivered, [200], 'the callback was acknowledged while the submit was still in flight');
  const [callback] = await callbacksOf(gw.database.db, cust);
  const [request] = await requestsOf(gw.database.db, cust);
  t.match(callback, { outcome: 'matched', request_id: request!.id });
  t.match(request, { status: 'completed', decision: 'approved', upstream_status: 202, result_callback_id: callback!.id });
});

t.test('a callback for a submit the provider refused still completes it', async (t) => {
  const gw = await submitGateway(t, {
    database,
    handler: (_received, res) => void res.writeHead(500).end(),
  });
  const cust = customer('refused');
  t.equal((await gw.submit(validRequest({ customerUuid: cust }))).statusCode, 502);
  t.match(await requestsOf(gw.database.db, cust), [{ status: 'submit_failed' }]);
  t.equal((await postCallback(gw.app, resultBody(cust))).statusCode, 200);
  t.match(await requestsOf(gw.database.db, cust), [{ status: 'completed', decision: 'approved' }]);
});
