import t from 'tap';
import { redactCpfs } from '../../src/personal-data/views.js';

// docs/personal-data.md: an export "never carries a full CPF: any CPF-like run of 11 digits in free
// text (a provider's error excerpt, a raw body) is [redacted]". Raw bodies keep a CPF as it was sent.

t.test('spaced, fullwidth and escaped CPFs in an invalid callback are redacted', async (t) => {
  const raw = '{"a":"529 982 247 25","b":"\\u0031\\u0031\\u0031\\u0034\\u0034\\u0034\\u0037\\u0037\\u0037\\u0033\\u0035","c":"７１４２８７９３８６０"}';
  const view = redactCpfs({ invalid: [{ customerUuid: 'c-1', rawBody: raw, body: { a: '529 982 247 25', c: '７１４２８７９３８６０' } }] }, undefined);
  const text = JSON.stringify(view);
  for (const cpf of ['529 982 247 25', '\\u0031\\u0031\\u0031', '７１４２８７９３８６０']) t.notOk(text.includes(cpf), `${cpf} is not exported`);
});

t.test('an idempotency key that is a UUID is kept as it is', async (t) => {
  const key = '1f3a9c2e-1234-5678-9012-a0b1c2d3e4f5';
  t.same(redactCpfs({ idempotencyKey: key }, undefined), { idempotencyKey: key });
});

t.test('identifiers keep their long digit runs (UUIDs, event ids); the subject\'s customerUuids stay; a valid CPF in a key still goes', async (t) => {
  const uuid = '1f3a9c2e-1234-5678-9012-a0b1c2d3e4f5';
  const view = redactCpfs(
    {
      customerUuids: [uuid, 'cust-000000000123'],
      requests: [{ customerUuid: uuid, idempotencyKey: 'order-529_982_247_25' }, { customerUuid: uuid, idempotencyKey: `k-${uuid}` }],
      events: [{ id: 'evt_019ac3f2a1b498765432109876543210' }],
    },
    undefined,
  );
  t.same(view.customerUuids, [uuid, 'cust-000000000123'], 'the subject\'s own identifiers, as in requests[].customerUuid');
  t.equal(view.events[0]!.id, 'evt_019ac3f2a1b498765432109876543210', 'an event id as it is');
  t.equal(view.requests[1]!.idempotencyKey, `k-${uuid}`, 'a UUID key as it is');
  t.equal(view.requests[0]!.idempotencyKey, 'order-***_***_***_**', 'a CPF typed with underscores into a key does not pass');
});
