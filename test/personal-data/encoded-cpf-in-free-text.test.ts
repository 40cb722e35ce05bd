import t from 'tap';
import { buildTestApp } from '../helpers/app.js';
import { cpfOf } from '../helpers/cpf.js';
import { freshDatabase } from '../helpers/database.js';
import { dumpDatabase, dumpForms } from './fixtures.js';

// srd address text (stored, returned, pushed) and an endpoint's description (stored, returned) are
// masked by maskCpfsInText, which read a CPF only bare or with one or two of . - _ / or spaces
// between digits. Written `712 . 345 . 678 - 17`, `712,345,678,17`, percent-encoded (%37%31...),
// JSON-escaped text (\u0037...) or as HTML references (&#55;...), the CPF was stored and answered whole.

const ADMIN_KEY = 'admin-key-0123456789abcdef';
const database = await freshDatabase(t);
const gw = await buildTestApp(t, { database, env: { ADMIN_API_KEYS: ADMIN_KEY } });
const { app } = gw;

const cpfs = [cpfOf(51), cpfOf(52), cpfOf(53), cpfOf(54), cpfOf(55)];
const forms = [
  (c: string) => `Rua ${c.slice(0, 3)} . ${c.slice(3, 6)} . ${c.slice(6, 9)} - ${c.slice(9)}`,
  (c: string) => `${c.slice(0, 3)},${c.slice(3, 6)},${c.slice(6, 9)},${c.slice(9)}`,
  (c: string) => [...c].map((d) => `%3${d}`).join(''),
  (c: string) => [...c].map((d) => `\\u003${d}`).join(''),
  (c: string) => [...c].map((d) => `&#${48 + Number(d)};`).join(''),
];
const planted = cpfs.map((c, i) => forms[i]!(c));

/** The text with every escape a reader could undo undone and separators dropped: a CPF in it is a CPF shown. */
function exposes(text: string, cpf: string): boolean {
  const decoded = text
    .replace(/\\+u00([0-9a-f]{2})/gi, (_, h: string) => String.fromCharCode(parseInt(h, 16)))
    .replace(/%([0-9a-f]{2})/gi, (_, h: string) => String.fromCharCode(parseInt(h, 16)))
    .replace(/&#(\d+);/g, (_, d: string) => String.fromCharCode(Number(d)));
  return decoded.replace(/[^0-9]/g, ' ').replace(/(\d) {1,3}(?=\d)/g, '$1').includes(cpf);
}

t.test('a CPF written with wide separators or escaped in srd text is masked before it is stored', async (t) => {
  const res = await app.inject({
    method: 'POST',
    url: '/v1/underwritings',
    payload: {
      customerUuid: 'enc-srd',
      cpf: cpfOf(56),
      costSavingEnabled: false,
      srd: { grossIncome: 1, address: { street: planted[0], number: planted[1], complement: planted[2], city: planted[3], state: planted[4] } },
    },
  });
  t.ok([202, 502, 504].includes(res.statusCode), res.body);
  const one = await app.inject({ method: 'GET', url: '/v1/underwritings/enc-srd' });
  t.equal(one.statusCode, 200, one.body);
  const dump = await dumpDatabase(database);
  for (const cpf of cpfs) {
    t.notOk(exposes(one.body, cpf), `GET holds no form of ${cpf}`);
    t.notOk(exposes(dump, cpf), `the database holds no form of ${cpf}`);
    for (const form of dumpForms(cpf)) t.notOk(dump.includes(form));
  }
  t.match(one.json().srd.address.street, /^Rua \*\*\* \. \*\*\* \. \*\*\* - \*\*$/, 'separators kept, digits masked');
});

t.test('an endpoint description holding an escaped CPF is masked', async (t) => {
  const res = await app.inject({
    method: 'POST',
    url: '/v1/endpoints',
    headers: { authorization: `Bearer ${ADMIN_KEY}` },
    payload: { url: 'http://127.0.0.1:9/hook', description: planted.join(' | ') },
  });
  t.equal(res.statusCode, 201, res.body);
  for (const cpf of cpfs) t.notOk(exposes(res.body, cpf), `the answer holds no form of ${cpf}`);
});

t.test('eleven digits that are no CPF are left as typed', async (t) => {
  const { maskCpfsInText } = await import('../../src/cpf.js');
  t.equal(maskCpfsInText('tel 11987654321, pedido 2024-11-27 10:00:00'), 'tel 11987654321, pedido 2024-11-27 10:00:00');
  t.equal(maskCpfsInText('12345678901'), '12345678901');
  // Numbers that merely stand near each other are no run: these join into 11923519085 and
  // 25461438407, whose check digits hold by chance, and stored srd text was masked for no CPF.
  t.equal(maskCpfsInText('Tel (11) 92351-9085'), 'Tel (11) 92351-9085');
  t.equal(maskCpfsInText('Av. Paulista, 2546, 14384-077'), 'Av. Paulista, 2546, 14384-077');
  t.equal(maskCpfsInText('lote 1529,982,247,25'), 'lote 1529,982,247,25', 'four groups are a CPF only as 3-3-3-2');
});
