import t from 'tap';
import { buildTestApp, TEST_PARTNER_TOKEN } from '../helpers/app.js';
import { cpfOf } from '../helpers/cpf.js';

// GET /console/:name answered an unknown file with 'no console file <name>': a CPF (bare or
// 123.456.789-01.js) or a partner token typed into the URL came back in the 404's body.

const gw = await buildTestApp(t);

t.test('an unknown console file is a 404 that does not name it back', async (t) => {
  const cpf = cpfOf(42);
  const formatted = `${cpf.slice(0, 3)}.${cpf.slice(3, 6)}.${cpf.slice(6, 9)}-${cpf.slice(9)}`;
  for (const name of [cpf, `${formatted}.js`, TEST_PARTNER_TOKEN, `x${cpf}.css`]) {
    const res = await gw.app.inject({ method: 'GET', url: `/console/${name}` });
    t.equal(res.statusCode, 404, res.body);
    t.equal(res.json().error, 'not_found');
    t.notOk(res.body.includes(name), `the answer does not carry ${name}`);
    t.notOk(res.body.replace(/\D/g, '').includes(cpf), 'nor the CPF\'s digits');
    t.notOk(res.body.includes(TEST_PARTNER_TOKEN), 'nor the partner token');
  }
  t.notOk(gw.logs.text().includes(cpf), 'the logs hold no CPF');
});
