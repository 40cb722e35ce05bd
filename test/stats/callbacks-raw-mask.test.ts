import t from 'tap';
import { buildTestApp } from '../helpers/app.js';
import { cpfOf } from '../helpers/cpf.js';

// GET /v1/callbacks serves an unmatched or invalid callback's raw bytes with CPF-like runs masked
// (stats/mask.ts). A CPF escaped twice (\\u0035..., JSON text carried inside a JSON string) or
// written with commas (529,982,247,25) went back whole.

const gw = await buildTestApp(t);
const { app } = gw;

t.test('a CPF escaped twice or written with commas in a raw callback body is masked in the list', async (t) => {
  const twice = cpfOf(61);
  const commas = cpfOf(62);
  const now = new Date().toISOString();
  const body =
    `{"customerUuid":"raw-mask","started":"${now}","finished":"${now}","serviceType":"CREDIT_SCORE",` +
    `"response":{"costSavingEnabled":true,"score":1,"riskBand":1,"limit":1},` +
    `"${[...twice].map((d) => `\\\\u003${d}`).join('')}":1,"note":"${commas.slice(0, 3)},${commas.slice(3, 6)},${commas.slice(6, 9)},${commas.slice(9)}"}`;
  const res = await app.inject({ method: 'POST', url: '/v1/callbacks/underwriting', headers: { 'content-type': 'application/json' }, payload: body });
  t.equal(res.statusCode, 200, res.body);
  const invalid = await app.inject({ method: 'POST', url: '/v1/callbacks/underwriting', headers: { 'content-type': 'application/json' }, payload: body.replace('"CREDIT_SCORE"', '"X"') });
  t.equal(invalid.statusCode, 400, invalid.body);
  const list = await app.inject({ method: 'GET', url: '/v1/callbacks?limit=10' });
  t.equal(list.statusCode, 200, list.body);
  t.equal(list.json().items.length, 2);
  const decoded = list.body.replace(/\\+u00([0-9a-f]{2})/gi, (_, h: string) => String.fromCharCode(parseInt(h, 16)));
  for (const cpf of [twice, commas]) t.notOk(decoded.replace(/[^0-9]/g, ' ').replace(/(\d) {1,3}(?=\d)/g, '$1').includes(cpf), `the list holds no form of ${cpf}`);
});
