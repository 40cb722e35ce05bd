import t from 'tap';
import { findAndMaskCpfs, hashCpf, INVISIBLE_FORMAT } from '../../src/cpf.js';
import { TEST_CPF_HASH_KEY } from '../helpers/app.js';
import { cpfFrom } from '../helpers/cpf.js';
import { ENGINE, freshDatabase } from '../helpers/database.js';
import { postCallback, resultBody } from '../callbacks/fixtures.js';
import { insertRequest } from '../queries/fixtures.js';
import { adminApp, dumpDatabase, dumpForms, post } from './fixtures.js';

// CPFs in a callback's bytes that reached the database in clear although the free-text rule reads
// them once the bytes are read as what they are: JSON whose escapes write another script's digits
// or a separator past ASCII, UTF-16 whose text is mostly past ASCII (or has a BOM and no NUL), and
// a callback's hash kept under the first CPF_HASH_KEY only while its subject's requests carry an
// older one.

const database = await freshDatabase(t);
/** The invisible characters a reader of a text does not see, and the BOM. */
const INVISIBLES = new RegExp(`[${INVISIBLE_FORMAT}\\uFEFF]`, 'gu');

/** Each digit as a JSON \u escape of the digit of the script whose zero is `zero`. */
const escapedIn = (cpf: string, zero: number) => [...cpf].map((d) => `\\u${(zero + Number(d)).toString(16).padStart(4, '0')}`).join('');
/** Each digit as the JSON escapes of its UTF-16 surrogate pair, in the mathematical bold digits (U+1D7CE). */
const escapedAstral = (cpf: string) =>
  [...cpf]
    .map((d) => {
      const s = String.fromCodePoint(0x1d7ce + Number(d));
      return `\\u${s.charCodeAt(0).toString(16)}\\u${s.charCodeAt(1).toString(16)}`;
    })
    .join('');
const grouped = (cpf: string, separator: string) => `${cpf.slice(0, 3)}${separator}${cpf.slice(3, 6)}${separator}${cpf.slice(6, 9)}${separator}${cpf.slice(9)}`;
const inScript = (cpf: string, zero: number) => [...cpf].map((d) => String.fromCodePoint(zero + Number(d))).join('');

/** Whatever a stored callback holds, read as the JSON it is (escapes decoded) and as UTF-16 in both orders. */
function readings(raw: Uint8Array, body: unknown): string[] {
  const bytes = Buffer.from(raw);
  const even = bytes.subarray(0, bytes.length - (bytes.length % 2));
  const texts = [bytes.toString('utf8'), even.toString('utf16le'), Buffer.from(even).swap16().toString('utf16le')];
  const decoded = texts.flatMap((text) => {
    try {
      return [JSON.stringify(JSON.parse(text.replace(/^\uFEFF/, '')))];
    } catch {
      return [];
    }
  });
  return [...texts, ...decoded, JSON.stringify(body)];
}

t.test('a CPF that JSON escapes write in another script, or with separators past ASCII, is masked in the bytes and the jsonb copy, and kept as its hash', async (t) => {
  const { app } = await adminApp(t, { database });
  const cpf = cpfFrom('418273605');
  const hash = hashCpf(cpf, TEST_CPF_HASH_KEY);
  const notes = [
    escapedIn(cpf, 0x0660), // Arabic-Indic, escaped
    escapedIn(cpf, 0x0966), // Devanagari, escaped
    escapedAstral(cpf), // mathematical digits, as surrogate escapes
    grouped(cpf, '\\u00a0'), // groups apart by an escaped no-break space
    grouped(cpf, '\\u3000'), // ... an escaped ideographic space
    `${cpf.slice(0, 9)}\\uff0d${cpf.slice(9)}`, // an escaped fullwidth hyphen before the check digits
    [...cpf].join('\u200b'), // each digit apart from the next by a zero-width space, in UTF-8
    [...cpf].join('\u2060'), // ... a word joiner
    `${cpf.slice(0, 6)}\u00ad${cpf.slice(6)}`, // a soft hyphen in the middle
    [...cpf].join('\\u200b'), // zero-width spaces as JSON escapes
  ];
  const before = await database.db.selectFrom('callbacks').select((eb) => eb.fn.max('id').as('id')).executeTakeFirst();
  for (const [i, note] of notes.entries()) {
    // Invalid, naming no customer: the jsonb copy is kept.
    const invalid = await postCallback(app, `{"customerUuid":null,"note":"${note}"}`);
    t.equal(invalid.statusCode, 400, invalid.body);
    // A valid result of no request of ours: stored unmatched.
    const unmatched = await postCallback(app, JSON.stringify({ ...resultBody(`cbhidden-${i}`), note: 'X' }).replace('"X"', `"${note}"`));
    t.equal(unmatched.statusCode, 200, unmatched.body);
  }
  const stored = await database.db
    .selectFrom('callbacks')
    .select(['id', 'outcome', 'raw_body', 'body', 'cpf_hashes'])
    .where('id', '>', Number(before?.id ?? 0))
    .orderBy('id')
    .execute();
  t.equal(stored.length, notes.length * 2);
  for (const [i, c] of stored.entries()) {
    const what = `${c.outcome} callback with ${notes[Math.floor(i / 2)]}`;
    for (const text of readings(c.raw_body, c.body)) {
      // Read also with its invisible characters gone, as a reader of the text sees it.
      for (const seen of [text, text.replace(INVISIBLES, '')]) {
        t.same(findAndMaskCpfs(seen).cpfs, [], `${what}: no CPF in what is stored, read as ${JSON.stringify(seen.slice(0, 40))}`);
      }
    }
    t.same(c.cpf_hashes, [hash], `${what}: keeps the CPF's hash`);
  }
  const erased = await post(app, '/v1/personal-data/erase', { cpf });
  t.same(erased.json().erased, { requests: 0, callbacks: notes.length * 2, events: notes.length }, "erasure by the CPF takes them all, and the unmatched ones' events (another customer's)");
  const dump = await dumpDatabase(database);
  for (const form of [cpf, ...[0x0660, 0x0966, 0x1d7ce].map((zero) => inScript(cpf, zero))].flatMap((f) => dumpForms(f))) {
    t.notOk(dump.includes(form), `the dump (${ENGINE}) holds no ${form}`);
  }
});

t.test('a body in UTF-16 is masked as UTF-16 though most of its text is past ASCII, it has a BOM and no NUL, or a stray last byte', async (t) => {
  const { app } = await adminApp(t, { database });
  const cpf = cpfFrom('630518274');
  const hash = hashCpf(cpf, TEST_CPF_HASH_KEY);
  const fullwidth = inScript(cpf, 0xff10);
  const le = (text: string, bom = false) => Buffer.concat([Buffer.from(bom ? [0xff, 0xfe] : []), Buffer.from(text, 'utf16le')]);
  const bodies: Array<[string, Buffer]> = [
    ['UTF-16LE, CJK text', le(JSON.stringify({ customerUuid: null, nota: '本人確認'.repeat(8), cpf }))],
    ['UTF-16BE, CJK text', le(JSON.stringify({ customerUuid: null, nota: '本人確認'.repeat(8), cpf })).swap16()],
    ['UTF-16LE with BOM, fullwidth digits', le(JSON.stringify({ cpf: fullwidth }), true)],
    ['UTF-16LE with BOM, nothing but fullwidth digits (no NUL)', le(fullwidth, true)],
    ['UTF-16BE with BOM, nothing but fullwidth digits (no NUL)', le(`\uFEFF${fullwidth}`).swap16()],
    ['UTF-16LE and a stray newline byte', Buffer.concat([le(JSON.stringify({ cpf })), Buffer.from('\n')])],
  ];
  const before = await database.db.selectFrom('callbacks').select((eb) => eb.fn.max('id').as('id')).executeTakeFirst();
  for (const [what, body] of bodies) {
    const refused = await postCallback(app, body);
    t.equal(refused.statusCode, 400, `${what}: ${refused.body}`);
  }
  const stored = await database.db.selectFrom('callbacks').select(['raw_body', 'body', 'cpf_hashes']).where('id', '>', Number(before?.id ?? 0)).orderBy('id').execute();
  t.equal(stored.length, bodies.length);
  for (const [i, c] of stored.entries()) {
    const [what, sent] = bodies[i]!;
    for (const text of readings(c.raw_body, c.body)) t.same(findAndMaskCpfs(text).cpfs, [], `${what}: no CPF in what is stored`);
    t.same(c.cpf_hashes, [hash], `${what}: keeps the CPF's hash`);
    t.equal(c.raw_body.length, sent.length, `${what}: as many bytes as received (masked in its own encoding)`);
  }
  const dump = await dumpDatabase(database);
  for (const form of [cpf, fullwidth].flatMap((f) => [...dumpForms(f), Buffer.from(f, 'utf16le').toString('hex'), Buffer.from(f, 'utf16le').swap16().toString('hex')])) {
    t.notOk(dump.includes(form), `the dump (${ENGINE}) holds no ${form}`);
  }
});

t.test('during a rotation of CPF_HASH_KEY, erasure by customerUuid takes a callback that holds the CPF of requests hashed under the older key', async (t) => {
  const newer = 'newer-cpf-hash-key-0123456789abcdefghij';
  const { app } = await adminApp(t, { database, env: { CPF_HASH_KEY: `${newer},${TEST_CPF_HASH_KEY}` } });
  const cpf = cpfFrom('857302164');
  const mine = 'cbhidden-rotated';
  // Stored before the rotation: hashed under the key that is now second.
  await insertRequest(database.db, { customerUuid: mine, cpf, status: 'expired', submittedAt: '2026-01-02T10:00:00Z' });
  const refused = await postCallback(app, { customerUuid: null, note: `titular ${cpf}` });
  t.equal(refused.statusCode, 400);

  const erased = await post(app, '/v1/personal-data/erase', { customerUuid: mine });
  t.same(erased.json().erased, { requests: 1, callbacks: 1, events: 0 }, 'its request, and the callback that held its CPF');
  const dump = await dumpDatabase(database);
  for (const key of [newer, TEST_CPF_HASH_KEY]) {
    for (const form of dumpForms(hashCpf(cpf, key))) t.notOk(dump.includes(form), `the dump (${ENGINE}) holds no hash of the CPF`);
  }
});
