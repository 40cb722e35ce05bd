import { setTimeout } from 'node:timers/promises';
import pg from 'pg';
import t from 'tap';
import { buildTestApp } from '../helpers/app.js';
import { freshDatabase, SERVER_URL } from '../helpers/database.js';
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

if (SERVER_URL) {
  t.test('a route failing on storage answers 503 storage_unavailable, never 500, and readiness follows at once', async (t) => {
    const database = await freshDatabase(t);
    const { app } = await buildTestApp(t, { database });
    const name = new URL(database.url!).pathname.slice(1);
    const admin = new pg.Client({ connectionString: SERVER_URL });
    await admin.connect();
    t.teardown(() => admin.end());
    /** New sessions of the gateway's database get `readOnly`; its open ones are ended (a failover to a standby). */
    const failover = async (readOnly: boolean) => {
      await admin.query(`alter database ${name} set default_transaction_read_only = ${readOnly ? 'on' : 'off'}`);
      await admin.query('select pg_terminate_backend(pid) from pg_stat_activity where datname = $1', [name]);
    };
    t.equal((await app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);

    await failover(true);
    const storageUnavailable = { error: 'storage_unavailable', message: 'the database is unavailable; try again shortly' };
    for (let i = 0; i < 2; i++) {
      // The first may meet a connection the failover ended; the next meets the read-only database.
      const submit = await app.inject({
        method: 'POST',
        url: '/v1/underwritings',
        payload: { customerUuid: `ro-${i}`, cpf: '52998224725', costSavingEnabled: false },
      });
      t.equal(submit.statusCode, 503, 'submit');
      t.same(submit.json(), storageUnavailable);
    }
    const callback = await app.inject({
      method: 'POST',
      url: '/v1/callbacks/underwriting',
      payload: {
        customerUuid: 'ro-0',
        started: '2026-01-01T00:00:00Z',
        finished: '2026-01-01T00:00:10Z',
        serviceType: 'CREDIT_SCORE',
        response: { costSavingEnabled: false, score: 700, riskBand: 2, limit: 1000 },
      },
    });
    t.equal(callback.statusCode, 503, 'callback');
    t.equal((await app.inject({ method: 'GET', url: '/v1/underwritings?limit=1' })).statusCode, 200, 'reads still work');
    const ready = await app.inject({ method: 'GET', url: '/readyz' });
    t.equal(ready.statusCode, 503, 'readiness sees what the routes saw (a read-only database), although select 1 still answers');
    t.same(ready.json(), storageUnavailable);

    await failover(false);
    const deadline = Date.now() + 10_000;
    let status = 503;
    while (status !== 200 && Date.now() < deadline) {
      await setTimeout(250);
      status = (await app.inject({ method: 'GET', url: '/readyz' })).statusCode;
    }
    t.equal(status, 200, 'ready again by itself once the routes stop failing');
  });
}
