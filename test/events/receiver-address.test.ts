import t from 'tap';
import { receiverLookup } from '../../src/events/receiver-address.js';
import { isNeverAReceiver, NEVER_A_RECEIVER_MESSAGE } from '../../src/http/receiver-address.js';
import { freshDatabase } from '../helpers/database.js';
import { sql } from 'kysely';
import { customer } from '../callbacks/fixtures.js';
import { adminGateway, call, stray } from './admin.js';
import { until } from './fixtures.js';
import { startReceiver } from './receiver.js';

// An endpoint is data an admin key writes at run time: it must not turn the gateway into a client of
// the cloud's metadata service (169.254.169.254, link-local), nor of the host itself through the
// unspecified address. Private and loopback receivers stay allowed (that is where events go).

const shared = await freshDatabase(t);

t.test('an endpoint at a link-local or unspecified address is refused, in every spelling; private and loopback ones are not', async (t) => {
  const { app } = await adminGateway(t, shared);
  for (const url of [
    'http://169.254.169.254/latest/meta-data/iam/security-credentials/',
    'http://2852039166/', // 169.254.169.254 as one number
    'http://0xa9.0xfe.0xa9.0xfe/',
    'http://[::ffff:169.254.169.254]/',
    'http://[fe80::1]:8080/hook',
    'http://0.0.0.0:3000/v1/callbacks/underwriting',
    'https://[::]/',
  ]) {
    const created = await call(app, 'POST', '/v1/endpoints', { url });
    t.equal(created.status, 400, `${url}: refused`);
    t.match(JSON.stringify(created.body), NEVER_A_RECEIVER_MESSAGE, `${url}: says why`);
  }
  const ok = await call(app, 'POST', '/v1/endpoints', { url: 'http://10.20.30.40:8080/hook' });
  t.equal(ok.status, 201, 'a private address is a receiver');
  const patched = await call(app, 'PATCH', `/v1/endpoints/${ok.body.id as string}`, { url: 'http://169.254.170.2/v2/credentials' });
  t.equal(patched.status, 400, 'nor can a PATCH point it there');
  t.equal((await call(app, 'POST', '/v1/endpoints', { url: 'http://127.0.0.1:9/hook' })).status, 201, 'a loopback address is a receiver');
});

t.test("a receiver's name that resolves to such an address fails its attempt before a byte is sent", async (t) => {
  const lookup = (host: string, all: boolean) =>
    new Promise<{ err: NodeJS.ErrnoException | null; address: unknown }>((resolve) =>
      receiverLookup(host, { all }, (err, address) => resolve({ err, address })),
    );
  for (const all of [false, true]) {
    const refused = await lookup('169.254.169.254', all);
    t.match(refused.err, { code: 'ERR_RECEIVER_ADDRESS' }, `all: ${all}: refused`);
    t.notMatch(refused.err?.message, '169.254.169.254', 'the error names no host (a host may hold a CPF)');
    const local = await lookup('localhost', all);
    t.equal(local.err, null, `all: ${all}: localhost resolves`);
  }
  t.ok(isNeverAReceiver('[fe80::abcd]'));
  t.notOk(isNeverAReceiver('receiver.bank.internal'), 'a name is judged once resolved');
  t.notOk(isNeverAReceiver('192.168.0.10'));
});

t.test('an endpoint stored at such an address before it was refused (no name to look up) is not sent to', async (t) => {
  // 0.0.0.0 reaches the host itself on Linux: the receiver below (on 127.0.0.1) would get the event.
  const receiver = await startReceiver(t);
  const earlier = await adminGateway(t, shared);
  const created = await call(earlier.app, 'POST', '/v1/endpoints', { url: `${receiver.url}/hook`, types: ['callback.unmatched'] });
  t.equal(created.status, 201);
  await earlier.app.close();
  // As an endpoint written before the refusal holds it; the next instance reads it at its start.
  const unspecified = `${receiver.url.replace('127.0.0.1', '0.0.0.0')}/hook`;
  await sql`update event_endpoints set url = ${unspecified}, updated_at = now() where id = ${created.body.id as string}`.execute(shared.db);
  const { app } = await adminGateway(t, shared);
  const cust = customer('never-a-receiver');
  await stray(app, cust);
  const failedAttempt = await until(async () => {
    const items = (await app.inject({ method: 'GET', url: `/v1/events?customerUuid=${cust}` })).json().items;
    const d = items[0]?.deliveries?.find((x: { url: string }) => x.url.endsWith(`:${new URL(receiver.url).port}/hook`));
    return d?.attempts >= 1 ? d : undefined;
  });
  t.match(failedAttempt.lastError, /no receiver is at/, 'the attempt failed on the address');
  t.equal(receiver.received.length, 0, 'nothing reached the host');
  await call(app, 'DELETE', `/v1/endpoints/${created.body.id as string}`);
});
