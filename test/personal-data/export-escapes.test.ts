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
