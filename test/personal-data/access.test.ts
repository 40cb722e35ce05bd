import t from 'tap';
import { buildTestApp, listen } from '../helpers/app.js';
import { freshDatabase } from '../helpers/database.js';
import { httpRequest } from '../helpers/http.js';
import { ADMIN_KEY, adminApp, get, post, SECOND_ADMIN_KEY, seedSubject } from './fixtures.js';

// One database for the file: a fresh PGlite costs seconds.
const database = await freshDatabase(t);
const QUERY_KEY = 'query-key-0123456789abcdef';

const routes = [
  { method: 'POST', url: '/v1/personal-data/export', body: { customerUuid: 'access-1' } },
  { method: 'POST', url: '/v1/personal-data/erase', body: { customerUuid: 'access-1' } },
  { method: 'GET', url: '/v1/audit', body: undefined },
] as const;

t.test('with ADMIN_API_KEYS unset every personal-data and audit route refuses 403 forbidden', async (t) => {
  const { app } = await buildTestApp(t, { database });
  await seedSubject(database.db, 'access-1', '39053344705');
  for (const route of routes) {
    const res = await app.inject({ method: route.method, url: route.url, payload: route.body, headers: { authorization: `Bearer ${ADMIN_KEY}` } });
    t.equal(res.statusCode, 403, route.url);
    t.same(res.json(), { error: 'forbidden', message: 'admin routes (personal data, audit, endpoints) are disabled: ADMIN_API_KEYS is not configured' });
  }
  const left = await database.db.selectFrom('underwriting_requests').select('id').where('customer_uuid', '=', 'access-1').execute();
  t.equal(left.length, 2, 'nothing erased');
});

t.test('a missing or wrong admin key is refused 401; either configured key is admitted', async (t) => {
  const { app } = await adminApp(t, { database, env: { QUERY_API_KEYS: QUERY_KEY } });
  for (const route of routes) {
    const send = (headers: Record<string, string>) => app.inject({ method: route.method, url: route.url, payload: route.body, headers });
    const missing = await send({});
    t.equal(missing.statusCode, 401, `${route.url} without a key`);
    t.same(missing.json(), { error: 'unauthorized', message: 'a valid admin key is required: Authorization: Bearer <key>' });
    t.equal(missing.headers['www-authenticate'], 'Bearer');
    t.equal((await send({ authorization: 'Bearer wrong-key-0123456789abcdef' })).statusCode, 401, `${route.url} with a wrong key`);
    t.equal((await send({ authorization: `Bearer ${QUERY_KEY}` })).statusCode, 401, `${route.url}: a query key is no admin key`);
    t.equal((await send({ authorization: ADMIN_KEY })).statusCode, 401, `${route.url}: the scheme is required`);
    t.equal((await send({ authorization: `Bearer ${ADMIN_KEY}x` })).statusCode, 401, `${route.url}: a longer key is another key`);
  }
  t.equal((await get(app, '/v1/audit', SECOND_ADMIN_KEY)).statusCode, 200);
  t.equal((await post(app, '/v1/personal-data/export', { customerUuid: 'access-nobody' }, ADMIN_KEY)).statusCode, 404);
});

t.test('a peer outside the query allowlist is refused 403, even with an admin key', async (t) => {
  const { app } = await adminApp(t, { database, env: { QUERY_ALLOWED_IPS: '127.0.0.1/32' } });
  const base = await listen(app);
  const headers = { authorization: `Bearer ${ADMIN_KEY}` };
  for (const route of routes) {
    const outside = await httpRequest(`${base}${route.url}`, { method: route.method, body: route.body, headers, localAddress: '127.0.0.2' });
    t.equal(outside.status, 403, route.url);
    t.same(outside.json, { error: 'forbidden', message: 'this address may not use this route' });
  }
  const inside = await httpRequest(`${base}/v1/audit`, { headers });
  t.equal(inside.status, 200);
});

t.test('the routes and their schemas are in the OpenAPI document', async (t) => {
  const { app } = await adminApp(t, { database });
  const doc = (await app.inject({ method: 'GET', url: '/docs/json' })).json();
  t.ok(doc.paths['/v1/personal-data/export'].post.requestBody);
  t.ok(doc.paths['/v1/personal-data/export'].post.responses['200']);
  t.ok(doc.paths['/v1/personal-data/erase'].post.responses['409']);
  t.ok(doc.paths['/v1/audit'].get.parameters.some((p: { name: string }) => p.name === 'action'));
  t.ok(doc.paths['/v1/audit'].get.responses['200']);
});
