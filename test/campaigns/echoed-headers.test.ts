import t from 'tap';
import { buildTestApp } from '../helpers/app.js';
import { cpfOf } from '../helpers/cpf.js';
import { CSV, upload } from './fixtures.js';

// A campaign's upload refused for its Content-Encoding named the header's value back in the 415:
// `content-encoding 52998224725 is not read` carried a CPF (or a key) the client typed there.

const QUERY_KEY = 'query-key-0123456789abcdef';
const gw = await buildTestApp(t, { env: { QUERY_API_KEYS: QUERY_KEY } });
const auth = { authorization: `Bearer ${QUERY_KEY}` };
const file = `customerUuid,cpf,costSavingEnabled\nenc-1,${cpfOf(1)},true\n`;

t.test('an unknown Content-Encoding is refused 415 without echoing it', async (t) => {
  const cpf = cpfOf(77);
  for (const value of [cpf, `${cpf.slice(0, 3)}.${cpf.slice(3, 6)}.${cpf.slice(6, 9)}-${cpf.slice(9)}`, QUERY_KEY]) {
    const res = await upload(gw.app, file, CSV, { ...auth, 'content-encoding': value });
    t.equal(res.statusCode, 415, res.body);
    t.notOk(res.body.includes(value), `the answer does not carry ${value}`);
    t.notOk(res.body.replace(/\D/g, '').includes(cpf), 'no digits of the CPF');
  }
});

t.test('a known coding is still named', async (t) => {
  const res = await upload(gw.app, file, CSV, { ...auth, 'content-encoding': 'gzip' });
  t.equal(res.statusCode, 415);
  t.match(res.json().message, /content-encoding gzip is not read/);
});
