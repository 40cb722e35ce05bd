import t from 'tap';
import { buildTestApp, TEST_CPF_HASH_KEY, TEST_PARTNER_TOKEN } from '../helpers/app.js';
import { freshDatabase } from '../helpers/database.js';
import { dumpDatabase } from '../personal-data/fixtures.js';

// X-Request-Id is adopted as the request's id when it is 1-64 of [A-Za-z0-9._:-] and holds no CPF:
// it is then on every log line of the request, echoed, stored with a submit (x_request_id),
// forwarded to the provider and sent with every pushed event. A key or token of ours fits that
// pattern (a partner token is 64 letters and digits; API keys 16+), so a client that put its key
// there (or a proxy that copied a header) had the secret written into every one of those places.

const QUERY_KEY = 'query-key-0123456789abcdef';
const ADMIN_KEY = 'admin-key-0123456789abcdef';
const CALLBACK_SECRET = 'callback-secret-0123456789';
const database = await freshDatabase(t);
const gw = await buildTestApp(t, {
  database,
  env: { QUERY_API_KEYS: QUERY_KEY, ADMIN_API_KEYS: ADMIN_KEY, CALLBACK_SECRET },
});
const { app } = gw;
const secrets = [TEST_PARTNER_TOKEN, QUERY_KEY, ADMIN_KEY, CALLBACK_SECRET, TEST_CPF_HASH_KEY].filter((s) => /^[A-Za-z0-9._:-]{1,60}$/.test(s));

t.test('an X-Request-Id holding one of our secrets is replaced, never logged or echoed', async (t) => {
  t.ok(secrets.length >= 4, 'secrets that fit the request id pattern');
  for (const secret of secrets) {
    for (const id of [secret, `r:${secret}`]) {
      const res = await app.inject({ method: 'GET', url: '/v1/underwritings/nobody', headers: { 'x-request-id': id, authorization: `Bearer ${QUERY_KEY}` } });
      t.equal(res.statusCode, 404);
      t.notOk(String(res.headers['x-request-id']).includes(secret), 'not echoed');
      t.match(res.headers['x-request-id'], /^[0-9a-f-]{36}$/, 'a generated id instead');
    }
  }
  const logs = gw.logs.text();
  for (const secret of secrets) t.notOk(logs.includes(secret), 'no log line holds the secret');
});

t.test('a submit whose X-Request-Id is a secret stores and forwards a generated id', async (t) => {
  const res = await app.inject({
    method: 'POST',
    url: '/v1/underwritings',
    headers: { 'content-type': 'application/json', 'x-request-id': ADMIN_KEY },
    payload: { customerUuid: 'rid-secret', cpf: '52998224725', costSavingEnabled: false },
  });
  t.ok([202, 502, 504].includes(res.statusCode), res.body);
  t.notOk(String(res.headers['x-request-id']).includes(ADMIN_KEY));
  const dump = await dumpDatabase(database);
  t.notOk(dump.includes(ADMIN_KEY), 'the database holds no secret');
  t.notOk(gw.logs.text().includes(ADMIN_KEY), 'the logs hold no secret');
});
