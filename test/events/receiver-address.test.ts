import t from 'tap';
import { isNeverAReceiver, NEVER_A_RECEIVER_MESSAGE, receiverLookup } from '../../src/events/receiver-address.js';
import { freshDatabase } from '../helpers/database.js';
import { adminGateway, call } from './admin.js';

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
