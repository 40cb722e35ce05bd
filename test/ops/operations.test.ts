import t from 'tap';
import { buildTestApp } from '../helpers/app.js';
import { SERVER_URL } from '../helpers/database.js';
import { databaseBehindRelay } from '../helpers/relay.js';

t.test('healthz and readyz answer when the database is up', async (t) => {
  const { app } = await buildTestApp(t);
  const health = await app.inject({ method: 'GET', url: '/healthz' });
  t.equal(health.statusCode, 200);
  t.same(health.json(), { status: 'ok' });
  const ready = await app.inject({ method: 'GET', url: '/readyz' });
  t.equal(ready.statusCode, 200);
  t.same(ready.json(), { status: 'ready' });
  t.ok(health.headers['x-request-id'], 'every answer carries its request id');
});

t.test('metrics expose request counts, latency and process figures', async (t) => {
  const { app } = await buildTestApp(t);
  await app.inject({ method: 'GET', url: '/healthz' });
  const res = await app.inject({ method: 'GET', url: '/metrics' });
  t.equal(res.statusCode, 200);
  t.match(res.headers['content-type'], /text\/plain/);
  t.match(res.body, /http_requests_total\{method="GET",route="\/healthz",status="200"\} 1/);
  t.match(res.body, /http_request_duration_seconds_bucket\{le="0.005",method="GET",route="\/healthz",status="200"\}/);
  t.match(res.body, /process_resident_memory_bytes/);
});

t.test('docs serve Swagger UI and an OpenAPI 3 document', async (t) => {
  const { app } = await buildTestApp(t);
  const ui = await app.inject({ method: 'GET', url: '/docs/' });
  t.equal(ui.statusCode, 200);
  t.match(ui.headers['content-type'], /text\/html/);
  const doc = await app.inject({ method: 'GET', url: '/docs/json' });
  t.equal(doc.statusCode, 200);
  const spec = doc.json();
  t.match(spec.openapi, /^3\./);
  t.ok(spec.paths['/readyz'], 'routes appear in the document');
});

t.test('unknown routes answer the contract error shape', async (t) => {
  const { app } = await buildTestApp(t);
  const res = await app.inject({ method: 'GET', url: '/nowhere?token=abc' });
  t.equal(res.statusCode, 404);
  t.same(res.json(), { error: 'not_found', message: 'no route GET /nowhere' });
});

t.test('security headers are set', async (t) => {
  const { app } = await buildTestApp(t);
  const res = await app.inject({ method: 'GET', url: '/healthz' });
  t.equal(res.headers['x-content-type-options'], 'nosniff');
  t.equal(res.headers['content-security-policy'], "default-src 'none';frame-ancestors 'none'", 'an API answers JSON: it loads nothing and is framed by no one');
  t.match(res.headers['strict-transport-security'], /max-age=\d+/);
  const docs = await app.inject({ method: 'GET', url: '/docs/' });
  t.equal(docs.statusCode, 200);
  t.match(docs.headers['content-security-policy'], /script-src 'self'/, 'Swagger UI has the policy it needs to run');
});

if (SERVER_URL) {
  t.test('readiness flips to 503 while PostgreSQL is unreachable and recovers by itself', async (t) => {
    const { database, relay } = await databaseBehindRelay(t);
    const { app } = await buildTestApp(t, { database });

    t.equal((await app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);
    relay.cut();
    const down = await app.inject({ method: 'GET', url: '/readyz' });
    t.equal(down.statusCode, 503);
    t.same(down.json(), { error: 'storage_unavailable', message: 'the database is unavailable; try again shortly' });
    t.equal((await app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200, 'the process itself is alive');
    relay.restore();
    t.equal((await app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200, 'ready again without a restart');
  });
}
