import { createHash } from 'node:crypto';
import { sql } from 'kysely';
import { Webhook } from 'standardwebhooks';
import t from 'tap';
import type { FastifyInstance } from 'fastify';
import { customer, insertRequest, postCallback, resultBody, startedPlus } from '../callbacks/fixtures.js';
import { buildTestApp } from '../helpers/app.js';
import { anotherConnection, freshDatabase } from '../helpers/database.js';
import { down as before0016, up as migrate0016 } from '../../migrations/0016_endpoint_in_flight.js';
import { ADMIN_KEY, adminGateway, call, stray } from './admin.js';
import { pushEnv, until, webhookSecret } from './fixtures.js';
import { startReceiver } from './receiver.js';

// Review findings on endpoints (issue 36), each with the test that fails without its fix.

const shared = await freshDatabase(t);

t.test("a configured endpoint's id is random, not the URL's hash, and stays the same across restarts and instances", async (t) => {
  const url = `http://127.0.0.1:9/configured-id?token=weak-${Date.now()}`;
  const env = pushEnv([url], webhookSecret(), { ADMIN_API_KEYS: ADMIN_KEY });
  const configuredId = async (app: FastifyInstance) =>
    (await call(app, 'GET', '/v1/endpoints')).body.items.find((e: any) => e.managed === 'config' && e.url.startsWith('http://127.0.0.1:9/configured-id')).id as string;
  const first = await adminGateway(t, shared, env);
  const id = await configuredId(first.app);
  t.match(id, /^ep_[0-9a-f]{32}$/);
  t.not(id, `ep_${createHash('sha256').update(url).digest('hex').slice(0, 32)}`, 'not derived from the URL alone');
  const second = await adminGateway(t, await anotherConnection(t, shared), env);
  t.equal(await configuredId(second.app), id, 'another instance lists the same id');
  await first.app.close();
  const restarted = await adminGateway(t, shared, env);
  t.equal(await configuredId(restarted.app), id, 'the same id after a restart');
});

t.test("migration 0016 gives an existing configured endpoint a random id, and its audit entries and endpoint.disabled events follow", async (t) => {
  const { db } = await freshDatabase(t);
  await before0016(db as never);
  const key = createHash('sha256').update('http://127.0.0.1:9/old?token=weak').digest('hex').slice(0, 32);
  const old = `ep_${key}`;
  await sql`insert into event_endpoints (id, key, managed, url, shown_url, status, created_at, updated_at)
            values (${old}, ${key}, 'config', 'http://127.0.0.1:9/old?token=redacted', 'http://127.0.0.1:9/old?token=redacted', 'disabled', now(), now()),
                   ('ep_${sql.raw('a'.repeat(32))}', ${'a'.repeat(32)}, 'api', 'http://127.0.0.1:9/api', 'http://127.0.0.1:9/api', 'active', now(), now())`.execute(db);
  await sql`insert into audit_log (action, actor, subject, counts) values ('endpoint.update', 'k', ${`endpoint:${old}`}, '{}'::jsonb)`.execute(db);
  await sql`insert into events (public_id, type, customer_uuid, created_at, data)
            values ('evt_x', 'endpoint.disabled', ${old}, now(), jsonb_build_object('endpointId', ${old}::text, 'url', 'u'))`.execute(db);
  await migrate0016(db as never);
  const rows = await db.selectFrom('event_endpoints').select(['id', 'key']).orderBy('managed').execute();
  const renamed = rows.find((r) => r.key === key)!.id;
  t.match(renamed, /^ep_[0-9a-f]{32}$/);
  t.not(renamed, old, 'a new id');
  t.equal(rows.find((r) => r.key === 'a'.repeat(32))!.id, `ep_${'a'.repeat(32)}`, 'an API endpoint keeps its (random) id');
  const audit = await sql<{ subject: string }>`select subject from audit_log where action = 'endpoint.update'`.execute(db);
  t.same(audit.rows.map((r) => r.subject), [`endpoint:${renamed}`]);
  const event = await sql<{ customer_uuid: string; data: { endpointId: string; url: string } }>`select customer_uuid, data from events where public_id = 'evt_x'`.execute(db);
  t.same(event.rows[0], { customer_uuid: renamed, data: { endpointId: renamed, url: 'u' } });
  const dump = JSON.stringify([rows, audit.rows, event.rows]);
  t.notOk(dump.includes(old), 'the old id is nowhere');
});

t.test('a rotated-out secret is cleared from the database once its overlap ends, and only the new one signs', async (t) => {
  const receiver = await startReceiver(t);
  const { app } = await adminGateway(t, shared);
  const created = await call(app, 'POST', '/v1/endpoints', { url: receiver.url, types: ['callback.unmatched'] });
  const id = created.body.id as string;
  t.teardown(() => call(app, 'DELETE', `/v1/endpoints/${id}`));
  // An overlap of 3 s: at 1 s a slow host could clear it before the read just below that sees it kept.
  const rotated = (await call(app, 'POST', `/v1/endpoints/${id}/rotate-secret`, { expireOldAfterS: 3 })).body.secret as string;
  const stored = () => shared.db.selectFrom('event_endpoints').select(['previous_secret', 'previous_expires_at']).where('id', '=', id).executeTakeFirstOrThrow();
  t.equal((await stored()).previous_secret, created.body.secret, 'kept during the overlap');
  const cleared = await until(async () => {
    const row = await stored();
    return row.previous_secret === null ? row : undefined;
  }, 10_000, 'the expired previous secret cleared');
  t.equal(cleared.previous_expires_at, null);
  const cust = customer('secret-cleared');
  await stray(app, cust);
  const [r] = (await receiver.waitFor((x) => x.json.data.customerUuid === cust)).filter((x) => x.json.data.customerUuid === cust);
  t.equal((r!.headers['webhook-signature'] as string).split(' ').length, 1, 'one signature');
  const verified = new Webhook(rotated).verify(r!.body, {
    'webhook-id': r!.headers['webhook-id'] as string,
    'webhook-timestamp': r!.headers['webhook-timestamp'] as string,
    'webhook-signature': r!.headers['webhook-signature'] as string,
  }) as { data: { customerUuid: string } };
  t.equal(verified.data.customerUuid, cust);
  // expireOldAfterS 0: the previous secret is not stored at all.
  await call(app, 'POST', `/v1/endpoints/${id}/rotate-secret`, { expireOldAfterS: 0 });
  t.equal((await stored()).previous_secret, null);
});

t.test("a paused endpoint's waiting events count as pending only for the types it receives", async (t) => {
  const { app, database } = await buildTestApp(t, { env: { ADMIN_API_KEYS: ADMIN_KEY } });
  await app.ready();
  const created = await call(app, 'POST', '/v1/endpoints', { url: 'http://127.0.0.1:9/picky', types: ['underwriting.completed'] });
  await call(app, 'PATCH', `/v1/endpoints/${created.body.id}`, { status: 'paused' });
  await stray(app, customer('picky1'));
  await stray(app, customer('picky2'));
  const stats = async () => (await app.inject({ url: '/v1/stats' })).json().now.events;
  t.equal((await stats()).pending, 0, 'no callback.unmatched waits for an endpoint that receives only underwriting.completed');
  const metrics = (await app.inject({ url: '/metrics' })).body;
  t.notMatch(metrics, /underwriting_event_url_deliveries\{url="http:\/\/127\.0\.0\.1:9",status="pending"\} [1-9]/, 'nor per URL in the metrics');
  const feed = (await app.inject({ url: '/v1/events?type=callback.unmatched' })).json();
  t.ok(feed.items.length >= 2);
  t.ok(
    feed.items.every((e: any) => !e.deliveries.some((d: any) => d.url === 'http://127.0.0.1:9/picky')),
    'no pending delivery shown for it under those events',
  );
  const cust = customer('picky3');
  await insertRequest(database.db, { customerUuid: cust, status: 'submitted' });
  await postCallback(app, resultBody(cust, { started: startedPlus(30) }));
  t.equal((await stats()).pending, 1, 'the underwriting.completed one waits for it');
  const completed = (await app.inject({ url: `/v1/events?customerUuid=${cust}&type=underwriting.completed` })).json().items[0];
  t.match(completed.deliveries, [{ url: 'http://127.0.0.1:9/picky', status: 'pending' }]);
});
