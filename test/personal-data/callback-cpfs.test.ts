import t from 'tap';
import { findAndMaskCpfs, formatCpf, hashCpf, longestDigitRun, plainTextWithoutCpfRun } from '../../src/cpf.js';
import { keptBody } from '../../src/callbacks/kept-body.js';
import { TEST_CPF_HASH_KEY } from '../helpers/app.js';
import { cpfFrom } from '../helpers/cpf.js';
import { ENGINE, freshDatabase } from '../helpers/database.js';
import { postCallback, resultBody } from '../callbacks/fixtures.js';
import { insertRequest } from '../queries/fixtures.js';
import { adminApp, dumpDatabase, dumpForms, post } from './fixtures.js';

// A callback's bytes were stored as received: a CPF the provider put in them (a field of its own,
// free text, an invalid callback's fields) sat in clear in callbacks.raw_body (and in the jsonb copy
// of an invalid one) until retention, and erasure by CPF found only an invalid callback naming no
// customer, and only where the CPF was written 52998224725 or 529.982.247-25. Now the bytes are
// stored masked, and a callback that completes no request keeps the CPF's keyed hash instead.

const database = await freshDatabase(t);

/** The ways a provider's bytes may write a CPF, each as a reader of a dump could find it. */
function formsOf(cpf: string): string[] {
  const spaced = `${cpf.slice(0, 3)} ${cpf.slice(3, 6)} ${cpf.slice(6, 9)} ${cpf.slice(9)}`;
  return [cpf, formatCpf(cpf), spaced].flatMap((form) => dumpForms(form));
}

/** A CPF's digits as JSON escapes (\u0035...), as a JSON encoder that escapes everything writes them. */
const escaped = (cpf: string) => [...cpf].map((d) => `\\u003${d}`).join('');

t.test('findAndMaskCpfs masks every CPF of a raw body, however written, and returns it; nothing else', async (t) => {
  const cpf = cpfFrom('529982247');
  const cases: Array<[string, string]> = [
    [`{"cpf":"${cpf}"}`, '{"cpf":"***********"}'],
    [`{"cpf":${cpf}}`, '{"cpf":***********}'],
    [`cpf ${formatCpf(cpf)}.`, 'cpf ***.***.***-**.'],
    [`"${escaped(cpf)}"`, `"${'*'.repeat(11)}"`],
    [`%35%32%39.%39%38%32.%32%34%37-%32%35`, '***.***.***-**'],
    [`&#53;&#50;&#57;982247&#x32;&#x35;`, '***********'],
    [[...cpf].map((d) => String.fromCharCode(d.charCodeAt(0) + 0xfee0)).join(''), '***********'],
    [`9${cpf}`, '9***********'],
  ];
  for (const [text, masked] of cases) {
    t.same(findAndMaskCpfs(text), { text: masked, cpfs: [cpf] }, JSON.stringify(text));
  }
  const wrongCheck = `${cpf.slice(0, 10)}${(Number(cpf[10]) + 1) % 10}`;
  t.same(findAndMaskCpfs(`{"phone":"${wrongCheck}","ts":1732780800000}`), { text: `{"phone":"${wrongCheck}","ts":1732780800000}`, cpfs: [] }, 'digits that are no CPF stay');
  const second = cpfFrom('714287938');
  t.same(findAndMaskCpfs(`${cpf} and ${formatCpf(second)} and ${cpf}`).cpfs, [cpf, second], 'each CPF once');
  // A chain of digits read first (017.278--319, ending at ';') held the first group of a CPF written in groups.
  const grouped = cpfFrom('278319940');
  const behindAChain = `017.${grouped.slice(0, 3)}--${grouped.slice(3, 6)};${grouped.slice(6, 9)} - ${grouped.slice(9)}`;
  t.same(findAndMaskCpfs(behindAChain), { text: '017.***--***;*** - **', cpfs: [grouped] }, 'groups whose first a chain before them took');
  // A CPF whose first group ends another CPF: both read on the text as received, both masked whole.
  const first = cpfFrom('111444777');
  const overlapping = cpfFrom(`${first.slice(9)}1234567`);
  const sharing = `${formatCpf(first).slice(0, 11)}.${first.slice(9)}${overlapping[2]}; ${overlapping.slice(3, 6)}; ${overlapping.slice(6, 9)}; ${overlapping.slice(9)}`;
  const sharingMasked = findAndMaskCpfs(sharing);
  t.equal(sharingMasked.text, '***.***.***.***; ***; ***; **', `a CPF whose first digits end another one (${sharing})`);
  t.ok(sharingMasked.cpfs.includes(first) && sharingMasked.cpfs.includes(overlapping), 'both found');
  // A CPF in groups right against one in a chain: a digit stands beside its first group only until the chain's CPF is masked.
  const glued = `${cpf}${first.slice(0, 3)};${first.slice(3, 6)};${first.slice(6, 9)};${first.slice(9)}`;
  t.same(findAndMaskCpfs(glued), { text: '**************;***;***;**', cpfs: [cpf, first] }, `a CPF in groups glued to one in a chain (${glued})`);
  const timestamps = '{"started":"2026-11-28T04:00:00.123456-03:00","finished":"2026-11-28T04:00:02.654321-03:00"}';
  t.same(findAndMaskCpfs(timestamps), { text: timestamps, cpfs: [] }, "a provider's timestamps are no CPF");
});

t.test('keptBody masks a body in UTF-16 in UTF-16, and keeps bytes without a CPF exactly', async (t) => {
  const cpf = cpfFrom('529982247');
  const json = JSON.stringify({ cpf: formatCpf(cpf) });
  const le = keptBody(Buffer.from(json, 'utf16le'));
  t.same(le.bytes, Buffer.from(json.replace(formatCpf(cpf), '***.***.***-**'), 'utf16le'), 'UTF-16LE, masked in place');
  t.same(le.cpfs, [cpf]);
  const be = keptBody(Buffer.from(json, 'utf16le').swap16());
  t.same(be.bytes, Buffer.from(json.replace(formatCpf(cpf), '***.***.***-**'), 'utf16le').swap16(), 'UTF-16BE too');
  const plain = Buffer.from('{"note":"no CPF \xff here: 12345678901"}', 'latin1');
  t.equal(keptBody(plain).bytes, plain, 'the very buffer when nothing was masked (not UTF-8, and eleven digits that are no CPF)');
});

t.test('the plain-text shortcut agrees with the regex it stands in for', async (t) => {
  // Random texts of digits and the characters that join or part them: whenever the shortcut says no
  // run of 11 digits can be read, the regex reads none; and it does say so for some texts, not all.
  let seed = 7;
  const random = (n: number) => {
    seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
    return (seed >>> 8) % n;
  };
  const alphabet = '0123456789012345678901234567890123456789 .-_/:,;()T\n\t';
  const separators = ['....', ' - - ', ',,,,,', '::::'];
  let decided = 0;
  let regexRuns = 0;
  for (let i = 0; i < 20000; i++) {
    // Now and then a long run of separators, where a CPF's groups may stand apart.
    const text = Array.from({ length: 8 + random(40) }, () => (random(8) === 0 ? separators[random(separators.length)] : alphabet[random(alphabet.length)])).join('');
    const long = longestDigitRun(text) >= 11;
    if (long) regexRuns += 1;
    if (plainTextWithoutCpfRun(text)) {
      decided += 1;
      if (long) t.fail(`the shortcut missed a run the regex reads: ${JSON.stringify(text)}`);
    } else if (!long && /^[\x00-\x7f]*$/.test(text) && !/[%\\&]/.test(text)) {
      t.fail(`the shortcut saw a run the regex does not: ${JSON.stringify(text)}`);
    }
  }
  t.ok(decided > 1000 && regexRuns > 1000, `both kinds drawn: ${decided} decided plain, ${regexRuns} with a run`);
  t.notOk(plainTextWithoutCpfRun(`712 . 345 . 678 - 17`), 'the 3-3-3-2 form');
  t.notOk(plainTextWithoutCpfRun(`712,345,678,17`), 'the 3-3-3-2 form with commas');
  t.notOk(plainTextWithoutCpfRun(`712....345....678....17`), 'groups apart by any number of separators');
  t.ok(plainTextWithoutCpfRun(`712,345,678,172`), 'not 3-3-3-2: plain');
  t.notOk(plainTextWithoutCpfRun(`a%35b`), 'an escape: the regex decides');
});

t.test('a CPF in a callback is stored masked in every kind of callback; export and erasure by CPF find what completed no request by its hash', async (t) => {
  const { app } = await adminApp(t, { database });
  const cpf = cpfFrom('386512097');
  const hash = hashCpf(cpf, TEST_CPF_HASH_KEY);
  const mine = 'cbcpf-subject-1';
  await insertRequest(database.db, { customerUuid: mine, cpf, status: 'submitted', submittedAt: '2026-01-02T10:00:00Z' });

  // Its result, with the CPF in a field the provider does not document.
  const matched = await postCallback(app, { ...resultBody(mine), cpf: formatCpf(cpf) });
  t.equal(matched.statusCode, 200, matched.body);
  // Another customer's result naming the subject in free text: stored unmatched.
  const unmatched = await postCallback(app, { ...resultBody('cbcpf-someone-else'), note: `titular ${cpf.slice(0, 3)} ${cpf.slice(3, 6)} ${cpf.slice(6, 9)} ${cpf.slice(9)}` });
  t.equal(unmatched.statusCode, 200, unmatched.body);
  // Invalid callbacks: naming another customer, naming none (escaped digits), a body in UTF-16, a CPF as a number.
  const invalids = [
    JSON.stringify({ ...resultBody('cbcpf-third-party'), started: formatCpf(cpf) }),
    `{"customerUuid":null,"note":"${escaped(cpf)}"}`,
    Buffer.from(JSON.stringify({ cpf }), 'utf16le'),
    `{"customerUuid":"cbcpf-numeric","cpf":${cpf}}`,
  ];
  for (const body of invalids) {
    const refused = await postCallback(app, body);
    t.equal(refused.statusCode, 400, `refused: ${refused.body}`);
  }

  const stored = await database.db.selectFrom('callbacks').select(['outcome', 'customer_uuid', 'raw_body', 'body', 'cpf_hashes']).orderBy('id').execute();
  const mineStored = stored.slice(-6);
  t.same(
    mineStored.map((c) => [c.outcome, c.cpf_hashes]),
    [
      ['matched', null],
      ['unmatched', [hash]],
      ['invalid', [hash]],
      ['invalid', [hash]],
      ['invalid', [hash]],
      ['invalid', [hash]],
    ],
    'a result keeps no hash (its request has one); every other callback keeps the CPF as its hash',
  );
  const invalidJson = mineStored[2]!.body as Record<string, unknown>;
  t.equal(invalidJson.started, '***.***.***-**', "an invalid callback's jsonb copy is masked too");
  t.equal(mineStored[5]!.body, null, 'a CPF written as a number leaves no JSON once masked: no copy');
  for (const c of mineStored) t.same(findAndMaskCpfs(Buffer.from(c.raw_body).toString('utf8')).cpfs, [], `nothing left to mask in a stored ${c.outcome} body`);

  let dump = await dumpDatabase(database);
  for (const form of formsOf(cpf)) t.notOk(dump.includes(form), `the dump (${ENGINE}) holds no ${form}`);

  const exported = await post(app, '/v1/personal-data/export', { cpf });
  t.equal(exported.statusCode, 200);
  const body = exported.json();
  t.equal(body.requests.length, 1, 'the request, with its result');
  const named = (list: Array<{ customerUuid: string | null }>) => list.map((c) => String(c.customerUuid)).sort();
  t.same(named(body.unmatched), ['cbcpf-someone-else'], 'the unmatched callback that named the CPF, found by its hash');
  t.same(named(body.invalid), ['cbcpf-numeric', 'cbcpf-third-party', 'null', 'null'], 'every invalid one that named it, whoever else it names');
  t.notMatch(exported.body, new RegExp(`${cpf}|${formatCpf(cpf).replace(/\./g, '\\.')}`), 'the export holds the bytes as stored: masked');

  const erased = await post(app, '/v1/personal-data/erase', { cpf });
  t.equal(erased.statusCode, 200);
  t.same(erased.json().erased, { requests: 1, callbacks: 6, events: 2 }, "the request, its result, and the five callbacks that named the CPF; the result's event and the unmatched one's");
  dump = await dumpDatabase(database);
  for (const form of dumpForms(hash)) t.notOk(dump.includes(form), `after erasure the dump (${ENGINE}) holds no hash of the CPF`);
});

t.test("erasure by customerUuid takes a callback naming no customer that holds its CPF, found by its requests' hash; one naming another customerUuid stays", async (t) => {
  const { app } = await adminApp(t, { database });
  const cpf = cpfFrom('204918375');
  const mine = 'cbcpf-by-customer';
  await insertRequest(database.db, { customerUuid: mine, cpf, status: 'expired', submittedAt: '2026-01-02T10:00:00Z' });
  const anonymous = await postCallback(app, { note: `titular ${cpf}` });
  t.equal(anonymous.statusCode, 400);
  // The same person under another customerUuid: that customer's, as erasure by customerUuid takes only its own.
  const sameCpfOtherCustomer = await postCallback(app, { customerUuid: 'cbcpf-by-customer-other', cpf });
  t.equal(sameCpfOtherCustomer.statusCode, 400);
  const someoneElse = await postCallback(app, { note: `titular ${cpfFrom('555444333')}` });
  t.equal(someoneElse.statusCode, 400);

  const erased = await post(app, '/v1/personal-data/erase', { customerUuid: mine });
  t.same(erased.json().erased, { requests: 1, callbacks: 1, events: 0 }, 'its request and the callback naming nobody that held its CPF');
  const left = await database.db.selectFrom('callbacks').select(['customer_uuid', 'cpf_hashes']).where('cpf_hashes', 'is not', null).execute();
  const kept = left.map((c) => [c.customer_uuid, c.cpf_hashes]);
  t.ok(kept.some(([customer]) => customer === 'cbcpf-by-customer-other'), "the other customerUuid's callback stays");
  t.ok(kept.some(([, hashes]) => JSON.stringify(hashes) === JSON.stringify([hashCpf(cpfFrom('555444333'), TEST_CPF_HASH_KEY)])), "another person's stays");
  const afterCpf = await post(app, '/v1/personal-data/erase', { cpf });
  t.same(afterCpf.json().erased, { requests: 0, callbacks: 1, events: 0 }, 'erasure by CPF then takes the one naming the other customerUuid');
});
