import t from 'tap';
import { buildTestApp } from '../helpers/app.js';
import { asciiDigits, cpfFrom, cpfOf, DIGIT_ZEROS, inScript } from '../helpers/cpf.js';
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

t.test('a CPF with four or more separators between its groups, or in the digits of another script, is masked; its check digits still decide', async (t) => {
  const { identifierHoldsCpf, maskCpfsInText } = await import('../../src/cpf.js');
  const cpf = cpfOf(57);
  const [a, b, c, d] = [cpf.slice(0, 3), cpf.slice(3, 6), cpf.slice(6, 9), cpf.slice(9)];
  const wrong = `${cpf.slice(0, 10)}${(Number(cpf[10]) + 1) % 10}`;
  t.equal(maskCpfsInText(`Rua ${a}....${b}....${c}....${d}`), 'Rua ***....***....***....**');
  t.equal(maskCpfsInText(`${a} - - ${b} - - ${c} - - ${d}`), '*** - - *** - - *** - - **');
  t.equal(maskCpfsInText(`${a}%2E%2E%2E%2E${b}%2E%2E%2E%2E${c}%2D%2D%2D%2D${d}`), '***%2E%2E%2E%2E***%2E%2E%2E%2E***%2D%2D%2D%2D**');
  for (const [script, zero] of Object.entries(DIGIT_ZEROS)) {
    t.equal(maskCpfsInText(`cpf ${inScript(cpf, zero)} ok`), 'cpf *********** ok', script);
    t.equal(maskCpfsInText(inScript(`${a}.${b}.${c}-${d}`, zero)), '***.***.***-**', `${script}, formatted`);
    t.equal(maskCpfsInText(inScript(wrong, zero)), inScript(wrong, zero), `${script}: eleven digits that are no CPF stay`);
  }
  t.equal(maskCpfsInText(`${a}.${inScript(b, DIGIT_ZEROS.arabicIndic)}.${inScript(c, DIGIT_ZEROS.devanagari)}-${d}`), '***.***.***-**', 'digits of several scripts in one run');
  t.equal(maskCpfsInText(`lote 1${a}....${b}....${c}....${d}`), `lote 1${a}....${b}....${c}....${d}`, 'four groups are a CPF only as 3-3-3-2');
  t.equal(maskCpfsInText(`${a}....${b}....${c}....${wrong.slice(9)}`), `${a}....${b}....${c}....${wrong.slice(9)}`, 'nor when the check digits fail');
  t.ok(identifierHoldsCpf(`req:${a}.-.-.${b}__${c}::${d}`), 'a request id with runs of separators');
  t.ok(identifierHoldsCpf(inScript(cpf, DIGIT_ZEROS.arabicIndic)), 'an identifier in Arabic-Indic digits');
});

t.test('srd text with such a CPF is masked before it is stored, answered or dumped', async (t) => {
  const cpfs = [cpfFrom('847261935'), cpfFrom('592837461'), cpfFrom('318274659'), cpfFrom('764239185')];
  const groups = (c: string) => [c.slice(0, 3), c.slice(3, 6), c.slice(6, 9), c.slice(9)];
  const written = [
    `Rua ${groups(cpfs[0]!).join(' .  .  . ')}`,
    inScript(cpfs[1]!, DIGIT_ZEROS.arabicIndic),
    inScript(groups(cpfs[2]!).join('-'), DIGIT_ZEROS.devanagari),
    `${groups(cpfs[3]!).join('////')}`,
  ];
  const res = await app.inject({
    method: 'POST',
    url: '/v1/underwritings',
    payload: {
      customerUuid: 'wide-srd',
      cpf: cpfOf(62),
      costSavingEnabled: false,
      srd: { grossIncome: 1, address: { street: written[0], number: written[1], complement: written[2], city: written[3] } },
    },
  });
  t.ok([202, 502, 504].includes(res.statusCode), res.body);
  const one = await app.inject({ method: 'GET', url: '/v1/underwritings/wide-srd' });
  t.equal(one.statusCode, 200, one.body);
  const dump = await dumpDatabase(database);
  // Digits of any script as ASCII, those apart by nothing but separators joined: a CPF in it is a CPF shown.
  const joined = (text: string) => asciiDigits(text).replace(/([0-9])[^\p{L}\p{N}]+(?=[0-9])/gu, '$1');
  for (const [i, cpf] of cpfs.entries()) {
    t.notOk(one.body.includes(written[i]!) || joined(one.body).includes(cpf), `GET holds no form of ${cpf}`);
    t.notOk(dump.includes(written[i]!) || joined(dump).includes(cpf), `the database holds no form of ${cpf}`);
  }
  t.same(one.json().srd.address, { street: 'Rua *** .  .  . *** .  .  . *** .  .  . **', number: '***********', complement: '***-***-***-**', city: '***////***////***////**' });
});

t.test("another script's digits escaped (JSON, percent-encoded UTF-8, HTML references) are read as digits: the CPF is masked where it stands", async (t) => {
  const { findAndMaskCpfs, maskCpfsInText } = await import('../../src/cpf.js');
  const cpf = cpfFrom('385027164');
  const wrong = `${cpf.slice(0, 10)}${(Number(cpf[10]) + 1) % 10}`;
  const codePoints = (text: string, zero: number) => [...inScript(text, zero)].map((c) => c.codePointAt(0)!);
  const hex4 = (n: number) => n.toString(16).padStart(4, '0');
  const json = (text: string, zero: number) =>
    [...inScript(text, zero)].map((c) => [...Array(c.length).keys()].map((i) => `\\u${hex4(c.charCodeAt(i))}`).join('')).join('');
  const forms: Record<string, (text: string) => string> = {
    'JSON, Arabic-Indic': (x) => json(x, DIGIT_ZEROS.arabicIndic),
    'JSON escaped twice, Devanagari, upper case': (x) => json(x, DIGIT_ZEROS.devanagari).replaceAll('\\u', '\\\\u').toUpperCase().replaceAll('\\\\U', '\\\\u'),
    'JSON, a surrogate pair a digit (mathematical bold)': (x) => json(x, 0x1d7ce),
    'percent-encoded UTF-8, Bengali': (x) => encodeURIComponent(inScript(x, DIGIT_ZEROS.bengali)),
    'percent-encoded UTF-8, Thai, lower case': (x) => encodeURIComponent(inScript(x, DIGIT_ZEROS.thai)).toLowerCase(),
    'HTML decimal references, Persian': (x) => codePoints(x, DIGIT_ZEROS.persian).map((c) => `&#${c};`).join(''),
    'HTML hexadecimal references with no ASCII digit, Gujarati 4-9': (x) => codePoints(x, 0xae6).map((c) => `&#x${c.toString(16)};`).join(''),
    'HTML hexadecimal references, an astral digit': (x) => codePoints(x, 0x1d7ce).map((c) => `&#X${c.toString(16).toUpperCase()};`).join(''),
  };
  for (const [name, write] of Object.entries(forms)) {
    const written = write(cpf);
    const { text, cpfs } = findAndMaskCpfs(`{"note":"titular ${written} ok"}`);
    t.equal(text, '{"note":"titular *********** ok"}', name);
    t.same(cpfs, [cpf], `${name}: the CPF it held, for its keyed hash`);
    t.equal(maskCpfsInText(write(wrong)), write(wrong), `${name}: eleven digits that are no CPF stay`);
  }
  // Gujarati's 4-9 written in hex hold no ASCII digit: the count that spares most text the regex must still let them through.
  const fours = '44447589885';
  t.equal(fours, cpfFrom('444475898'), 'a CPF of digits 4-9 only');
  t.equal(maskCpfsInText(`cpf ${forms['HTML hexadecimal references with no ASCII digit, Gujarati 4-9']!(fours)}`), 'cpf ***********');
  const [a, b, c, d] = [cpf.slice(0, 3), cpf.slice(3, 6), cpf.slice(6, 9), cpf.slice(9)];
  t.equal(
    maskCpfsInText(`${a}.${forms['percent-encoded UTF-8, Bengali']!(b)}.${forms['HTML decimal references, Persian']!(c)}-${json(d, DIGIT_ZEROS.arabicIndic)} e 12`),
    '***.***.***-** e 12',
    'forms mixed in one run, separators kept',
  );
  t.equal(maskCpfsInText(`${a} ; ${forms['HTML decimal references, Persian']!(b)} ; ${c} ; ${d}`), '*** ; *** ; *** ; **', 'in groups 3-3-3-2');
  t.equal(maskCpfsInText('caf\\u00e9 &#8212; %C3%A9 &#x2014; 12345'), 'caf\\u00e9 &#8212; %C3%A9 &#x2014; 12345', 'escapes of what is no digit stay');
  // What follows a digit's escape is not taken into it: a lone low surrogate, a stray continuation byte.
  t.equal(maskCpfsInText(`${forms['JSON, Arabic-Indic']!(cpf)}\\udcff`), '***********\\udcff', 'a lone low surrogate after the last digit');
  t.equal(maskCpfsInText(`${forms['percent-encoded UTF-8, Bengali']!(cpf)}%80`), '***********%80', 'a stray continuation byte after the last digit');
  // Ten digits are no CPF, however they are escaped: an escaped digit is one digit, never the hex digits of an escape.
  const ten = (x: string) => encodeURIComponent(inScript(x, DIGIT_ZEROS.arabicIndic));
  t.equal(maskCpfsInText(`ref ${ten('12.353.835-47')}`), `ref ${ten('12.353.835-47')}`, 'ten digits percent-encoded stay');
});

t.test("JavaScript code point escapes (\\u{665}) and HTML references without their ';' are read as the digits they are", async (t) => {
  const { findAndMaskCpfs, maskCpfsInText } = await import('../../src/cpf.js');
  const cpf = cpfFrom('385027164');
  const wrong = `${cpf.slice(0, 10)}${(Number(cpf[10]) + 1) % 10}`;
  const codePoints = (text: string, zero: number) => [...inScript(text, zero)].map((c) => c.codePointAt(0)!);
  const forms: Record<string, (text: string) => string> = {
    'code point escapes, ASCII': (x) => [...x].map((d) => `\\u{${(48 + Number(d)).toString(16)}}`).join(''),
    'code point escapes with zeros, Arabic-Indic': (x) => codePoints(x, DIGIT_ZEROS.arabicIndic).map((c) => `\\u{00${c.toString(16)}}`).join(''),
    'code point escapes with no ASCII digit, Gujarati 4-9': (x) => codePoints(x, 0xae6).map((c) => `\\u{${c.toString(16)}}`).join(''),
    'HTML decimal references without ;, ASCII': (x) => [...x].map((d) => `&#${48 + Number(d)}`).join(''),
    'HTML hexadecimal references without ;, ASCII': (x) => [...x].map((d) => `&#x3${d}`).join(''),
    'HTML decimal references without ;, Persian': (x) => codePoints(x, DIGIT_ZEROS.persian).map((c) => `&#${c}`).join(''),
  };
  for (const [name, write] of Object.entries(forms)) {
    const { text, cpfs } = findAndMaskCpfs(`{"note":"titular ${write(cpf)} ok"}`);
    t.equal(text, '{"note":"titular *********** ok"}', name);
    t.same(cpfs, [cpf], `${name}: the CPF it held`);
    t.equal(maskCpfsInText(write(wrong)), write(wrong), `${name}: eleven digits that are no CPF stay`);
  }
  // Separators written the same ways (Rust's escape_unicode, HTML without ';') part the groups as a dot or a dash does.
  const [a, b, c, d] = [cpf.slice(0, 3), cpf.slice(3, 6), cpf.slice(6, 9), cpf.slice(9)];
  const escapeAll = (x: string, as: (code: number) => string) => [...x].map((ch) => as(ch.charCodeAt(0))).join('');
  for (const [name, as] of [
    ['code point escapes', (code: number) => `\\u{${code.toString(16)}}`],
    ['HTML references without ;', (code: number) => `&#${code}`],
  ] as const) {
    const written = escapeAll(`${a}.${b}.${c}-${d}`, as);
    t.same(findAndMaskCpfs(`cpf ${written} ok`).cpfs, [cpf], `${name}, separators too: ${written}`);
    const masked = [...`${a}.${b}.${c}-${d}`].map((ch) => (/\d/.test(ch) ? '*' : as(ch.charCodeAt(0)))).join('');
    t.equal(maskCpfsInText(`cpf ${written} ok`), `cpf ${masked} ok`, `${name}: each digit one star, the separators as written`);
  }
  const gujarati = forms['code point escapes with no ASCII digit, Gujarati 4-9']!('44447589885');
  t.equal(maskCpfsInText(`cpf ${gujarati}`), 'cpf ***********', 'a run of code point escapes holding no ASCII digit still reaches the regex');
});

t.test('srd text with such a CPF holds none of it once stored', async (t) => {
  const cpf = cpfFrom('604918273');
  const persian = [...inScript(cpf, DIGIT_ZEROS.persian)].map((c) => `&#${c.codePointAt(0)};`).join('');
  const res = await app.inject({
    method: 'POST',
    url: '/v1/underwritings',
    payload: { customerUuid: 'escaped-script-srd', cpf: cpfOf(63), costSavingEnabled: false, srd: { grossIncome: 1, address: { street: `Rua ${persian}` } } },
  });
  t.ok([202, 502, 504].includes(res.statusCode), res.body);
  const one = await app.inject({ method: 'GET', url: '/v1/underwritings/escaped-script-srd' });
  t.equal(one.json().srd.address.street, 'Rua ***********');
  const dump = await dumpDatabase(database);
  t.notOk(dump.includes(persian), 'the database holds no reference of it');
  t.notOk(dump.includes(cpf), 'nor the CPF');
});

t.test("Python's \\U escapes, JavaScript's escape() (%u0665) and code point escapes of surrogate halves (\\u{d835}\\u{dfd3}) are read as the digits they are", async (t) => {
  const { findAndMaskCpfs, maskCpfsInText } = await import('../../src/cpf.js');
  const cpf = cpfFrom('385027164');
  const wrong = `${cpf.slice(0, 10)}${(Number(cpf[10]) + 1) % 10}`;
  const hex = (n: number, width: number) => n.toString(16).padStart(width, '0');
  // Each UTF-16 code unit of the text in another script, as `as` writes it (astral digits as two halves).
  const units = (text: string, zero: number, as: (unit: string) => string) => [...inScript(text, zero)].map((c) => [...Array(c.length).keys()].map((i) => as(hex(c.charCodeAt(i), 4))).join('')).join('');
  const forms: Record<string, (text: string) => string> = {
    "Python's \\U, an astral digit (mathematical bold)": (x) => [...inScript(x, 0x1d7ce)].map((c) => `\\U${hex(c.codePointAt(0)!, 8)}`).join(''),
    "Python's \\U, Arabic-Indic": (x) => [...inScript(x, DIGIT_ZEROS.arabicIndic)].map((c) => `\\U${hex(c.codePointAt(0)!, 8)}`).join(''),
    "Python's \\U, ASCII": (x) => [...x].map((d) => `\\U${hex(48 + Number(d), 8)}`).join(''),
    "JavaScript's escape(), Arabic-Indic": (x) => escape(inScript(x, DIGIT_ZEROS.arabicIndic)),
    "JavaScript's escape(), an astral digit as its two halves": (x) => escape(inScript(x, 0x1d7ce)),
    'escape()-style %u, ASCII': (x) => [...x].map((d) => `%u${hex(48 + Number(d), 4)}`).join(''),
    'code point escapes of surrogate halves, an astral digit': (x) => units(x, 0x1d7ce, (unit) => `\\u{${unit}}`),
    'surrogate halves, one in braces and one not': (x) => units(x, 0x1d7ce, (unit) => (/^d[89ab]/.test(unit) ? `\\u{${unit}}` : `\\u${unit}`)),
    'surrogate halves, the other way round': (x) => units(x, 0x1d7ce, (unit) => (/^d[89ab]/.test(unit) ? `\\u${unit}` : `\\u{${unit}}`)),
  };
  t.equal(forms["JavaScript's escape(), an astral digit as its two halves"]!('1'), '%uD835%uDFCF', 'escape() writes an astral digit as two %u halves');
  for (const [name, write] of Object.entries(forms)) {
    const { text, cpfs } = findAndMaskCpfs(`{"note":"titular ${write(cpf)} ok"}`);
    t.equal(text, '{"note":"titular *********** ok"}', name);
    t.same(cpfs, [cpf], `${name}: the CPF it held`);
    t.equal(maskCpfsInText(write(wrong)), write(wrong), `${name}: eleven digits that are no CPF stay`);
  }
  t.equal(maskCpfsInText('50%u0025 \\U0001F600 \\u{d83d}\\u{de00} 12'), '50%u0025 \\U0001F600 \\u{d83d}\\u{de00} 12', 'escapes of what is no digit stay');
  // As written, an escape's last hex digits and the digits after it may show a CPF: that reading stays beside the one with escapes written out.
  for (const [written, masked] of [
    ['\\U0001d7d52998224725', '\\U0001d7d***********'],
    ['%uD835%uDFD52998224725', '%uD835%uDFD***********'],
    ['%u00052998224725', '%u000***********'],
    ['\\U000000052998224725', '\\U0000000***********'],
    // And a CPF in groups glued to such a one: the grouped reading with the chain's CPF starred, as in text with no escape.
    ['\\U0001d7d52998224725111;444;777;35', '\\U0001d7d**************;***;***;**'],
    ['%u00052998224725111;444;777;35', '%u000**************;***;***;**'],
  ]) {
    t.equal(maskCpfsInText(written!), masked, `${written}: the CPF its text shows`);
  }
});
