import t from 'tap';
import { buildTestApp } from '../helpers/app.js';
import { freshDatabase } from '../helpers/database.js';
import { dumpDatabase, dumpForms } from '../personal-data/fixtures.js';
import { CSV, cpfOf, get, line, ndjson, upload, holdTheProvider } from './fixtures.js';

// A rejected line's issues name the unknown field as the client wrote it, and are answered, stored
// with the campaign and shown again by GET /v1/campaigns/:id. A field name that is a CPF was masked
// only when written bare or with one or two of . - _ / or spaces between digits: percent-encoded
// (%37%31...), JSON-escaped (\u0037...), or with wider or other separators (712 . 345 . 678 - 17,
// 712,345,678,17) it went back, and into the database, whole.

const database = await freshDatabase(t);
const gw = await buildTestApp(t, { database });
await holdTheProvider(database.db);
const { app } = gw;

const cpfs = [cpfOf(91), cpfOf(92), cpfOf(93), cpfOf(94), cpfOf(95)];
const percent = (cpf: string) => [...cpf].map((d) => `%3${d}`).join('');
const escaped = (cpf: string) => [...cpf].map((d) => `\\u003${d}`).join('');
const wide = (cpf: string) => `${cpf.slice(0, 3)} . ${cpf.slice(3, 6)} . ${cpf.slice(6, 9)} - ${cpf.slice(9)}`;
const commas = (cpf: string) => `${cpf.slice(0, 3)},${cpf.slice(3, 6)},${cpf.slice(6, 9)},${cpf.slice(9)}`;
const names = [percent(cpfs[0]!), escaped(cpfs[1]!), wide(cpfs[2]!), commas(cpfs[3]!), `x${percent(cpfs[4]!)}y`];

/** Every form a reader could take back for a CPF: as written, and decoded. */
function exposes(text: string, cpf: string): boolean {
  const decoded = text
    .replace(/\\\\u00([0-9a-f]{2})/gi, (_, h: string) => String.fromCharCode(parseInt(h, 16)))
    .replace(/\\u00([0-9a-f]{2})/gi, (_, h: string) => String.fromCharCode(parseInt(h, 16)))
    .replace(/%([0-9a-f]{2})/gi, (_, h: string) => String.fromCharCode(parseInt(h, 16)));
  return decoded.replace(/[\s.,\-]/g, '').includes(cpf);
}

t.test('an NDJSON line with an unknown field named by an encoded CPF: the issue never carries it', async (t) => {
  const res = await upload(app, ndjson(names.map((name, i) => ({ ...line(`enc-${i}`, 60 + i), [name]: 1 }))));
  t.equal(res.statusCode, 202, res.body);
  t.equal(res.json().rejectedTotal, names.length);
  const view = await get(app, `/v1/campaigns/${res.json().id}`);
  const dump = await dumpDatabase(database);
  for (const cpf of cpfs) {
    t.notOk(exposes(res.body, cpf), `the answer holds no form of ${cpf}`);
    t.notOk(exposes(view.body, cpf), `GET /v1/campaigns/:id holds no form of ${cpf}`);
    t.notOk(exposes(gw.logs.text(), cpf), `the logs hold no form of ${cpf}`);
    t.notOk(exposes(dump, cpf), `the database holds no form of ${cpf}`);
    for (const form of dumpForms(cpf)) t.notOk(dump.includes(form));
  }
});

t.test('a CSV header naming a column by an encoded CPF: the 400 never carries it', async (t) => {
  const header = ['customerUuid', 'cpf', 'costSavingEnabled', ...names.map((n) => `"${n}"`)].join(',');
  const res = await upload(app, `${header}\ncsv-1,${cpfOf(70)},true${',x'.repeat(names.length)}\n`, CSV);
  t.equal(res.statusCode, 400, res.body);
  for (const cpf of cpfs) t.notOk(exposes(res.body, cpf), `the answer holds no form of ${cpf}`);
});
