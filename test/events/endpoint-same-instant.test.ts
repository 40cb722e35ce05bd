import { Webhook } from 'standardwebhooks';
import t from 'tap';
import { customer } from '../callbacks/fixtures.js';
import { freshDatabase } from '../helpers/database.js';
import { buildTestApp } from '../helpers/app.js';
import { ADMIN_KEY, call, stray } from './admin.js';
import { type Received, startReceiver } from './receiver.js';

// Two changes to one endpoint in the same millisecond (two admins at once; a rotation takes its
// time before it waits for the row's lock) write the same updated_at: every instance must still
// send with what the second one wrote.

const shared = await freshDatabase(t);

const verifies = (secret: string, r: Received) => {
  try {
    new Webhook(secret).verify(r.body, {
      'webhook-id': r.headers['webhook-id'] as string,
      'webhook-timestamp': r.headers['webhook-timestamp'] as string,
      'webhook-signature': r.headers['webhook-signature'] as string,
    });
    return true;
  } catch {
    return false;
  }
};

t.test('a rotation written in the same millisecond as the change before it still changes the secret that signs', async (t) => {
  let frozen: number | undefined;
  const { app } = await buildTestApp(t, {
    database: shared,
    clock: () => new Date(frozen ?? Date.now()),
    env: { ADMIN_API_KEYS: ADMIN_KEY, EVENT_WEBHOOK_TIMEOUT_MS: '5000' },
  });
  await app.ready();
  const receiver = await startReceiver(t);
  const created = await call(app, 'POST', '/v1/endpoints', { url: receiver.url, types: ['callback.unmatched'] });
  t.equal(created.status, 201);
  const id = created.body.id as string;
  frozen = Date.now() + 1000;
  t.equal((await call(app, 'PATCH', `/v1/endpoints/${id}`, { description: 'first change' })).status, 200);
  const rotated = await call(app, 'POST', `/v1/endpoints/${id}/rotate-secret`, { expireOldAfterS: 0 });
  t.equal(rotated.status, 200);
  frozen = undefined;
  const cust = customer('same-instant');
  await stray(app, cust);
  const got = (await receiver.waitFor((r) => r.json.data.customerUuid === cust)).find((r) => r.json.data.customerUuid === cust)!;
  t.ok(verifies(rotated.body.secret, got), 'signed with the new secret');
  t.notOk(verifies(created.body.secret, got), 'not with the old one, which expireOldAfterS 0 dropped');
  await call(app, 'DELETE', `/v1/endpoints/${id}`);
});
