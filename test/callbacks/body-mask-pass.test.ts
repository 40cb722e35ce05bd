import { sql } from 'kysely';
import t, { type Test } from 'tap';
import { BODY_MASK_PASS, maskStoredBodies } from '../../src/callbacks/body-mask-pass.js';
import { cpfHasher, formatCpf, hashCpf } from '../../src/cpf.js';
import { PASS_GOES_ON_MS, SETTLED_MS } from '../../src/db/maintenance-pass.js';
import { buildTestApp, TEST_CPF_HASH_KEY } from '../helpers/app.js';
import { cpfFrom } from '../helpers/cpf.js';
import { ENGINE, freshDatabase } from '../helpers/database.js';
import { until } from '../helpers/until.js';
import { insertRequest, resultBody } from './fixtures.js';
import { storeResult } from '../queries/fixtures.js';
import { adminApp, dumpDatabase, dumpForms, insertInvalid, post } from '../personal-data/fixtures.js';

// Migration 0026: callbacks that a version before stored with a CPF in clear (their bytes, an
// invalid one's jsonb copy) are masked by a pass at start, as the callback route now masks before
// storing, and those that complete no request keep the CPF's hash, so that erasure finds them.

const never = new AbortController().signal;
const hash = cpfHasher(TEST_CPF_HASH_KEY);

/** Rows as the version before stored them: the bytes as received, CPF and all. */
async function storedAsBefore(database: Awaited<ReturnType<typeof freshDatabase>>, cpf: string, prefix: string) {
  const request = await insertRequest(database.db, { customerUuid: `${prefix}-1`, cpf, status: 'submitted' });
  await storeResult(database.db, request, { ...resultBody(`${prefix}-1`), cpf } as ReturnType<typeof resultBody>);
  await insertInvalid(database.db, { customerUuid: null, raw: `{"note":"titular ${formatCpf(cpf)}","customerUuid":12}` });
  await insertInvalid(database.db, { customerUuid: `${prefix}-other`, raw: `{"customerUuid":"${prefix}-other","cpf":${cpf}}` });
  await insertInvalid(database.db, { customerUuid: null, raw: '{"customerUuid":"no-cpf-here","score":12345678901234}' });
}

t.test('the pass masks what a version before stored, keeps the hashes of what completed no request, and is over once it has gone on long enough', async (t) => {
  const database = await freshDatabase(t);
  const cpf = cpfFrom('602118734');
  await storedAsBefore(database, cpf, 'pass');
  const untouched = await database.db.selectFrom('callbacks').select(['id', 'raw_body']).orderBy('id', 'desc').executeTakeFirstOrThrow();

  // Past SETTLED_MS: every row read counts as passed.
  const settled = () => new Date(Date.now() + 2 * SETTLED_MS);
  const done = await maskStoredBodies(database.db, hash, settled, never);
  t.same(done, { callbacks: 3 }, 'the three callbacks that held the CPF');
  const rows = await database.db.selectFrom('callbacks').select(['id', 'outcome', 'raw_body', 'body', 'cpf_hashes']).orderBy('id').execute();
  t.same(
    rows.map((r) => [r.outcome, r.cpf_hashes]),
    [
      ['matched', null],
      ['invalid', [hashCpf(cpf, TEST_CPF_HASH_KEY)]],
      ['invalid', [hashCpf(cpf, TEST_CPF_HASH_KEY)]],
      ['invalid', null],
    ],
  );
  t.equal((rows[0]!.body as Record<string, unknown>).cpf, '***********', "a result's jsonb copy masked");
  t.equal((rows[1]!.body as Record<string, unknown>).note, 'titular ***.***.***-**');
  t.equal(rows[2]!.body, null, 'a CPF as a number leaves no JSON once masked: the copy goes');
  t.same(Buffer.from(rows[3]!.raw_body), Buffer.from(untouched.raw_body), 'bytes that held no CPF are kept exactly');
  const dump = await dumpDatabase(database);
  for (const form of [cpf, formatCpf(cpf)].flatMap((f) => dumpForms(f))) t.notOk(dump.includes(form), `the dump (${ENGINE}) holds no ${form}`);

  const pass = await database.db.selectFrom('maintenance_passes').selectAll().where('name', '=', BODY_MASK_PASS).executeTakeFirstOrThrow();
  t.ok(pass.finished_at, 'finished');
  t.equal(Number(pass.through_id), Number(untouched.id), 'read through the last callback');
  await insertInvalid(database.db, { customerUuid: null, raw: `{"late":"${cpf}"}` });
  t.same(await maskStoredBodies(database.db, hash, settled, never), { callbacks: 1 }, 'a later start goes on from there: only what an instance of the version before wrote since');
  const later = new Date(pass.finished_at!.getTime() + PASS_GOES_ON_MS + 1000);
  t.equal(await maskStoredBodies(database.db, hash, () => later, never), undefined, 'over once it has gone on long enough');
});

t.test('rows received within SETTLED_MS are masked but not counted as read: a row an older instance commits late, under a lower id, is still reached', async (t) => {
  const database = await freshDatabase(t);
  const cpf = cpfFrom('418273645');
  // An id taken by a transaction of the version before that has not committed yet.
  await insertInvalid(database.db, { customerUuid: null, raw: '{"placeholder":true}' });
  const [taken] = await database.db.selectFrom('callbacks').select('id').execute();
  await database.db.deleteFrom('callbacks').execute();
  await insertInvalid(database.db, { customerUuid: null, raw: `{"a":"${cpf}"}` });
  t.same(await maskStoredBodies(database.db, hash, () => new Date(), never), { callbacks: 1 }, 'masked at once');
  const passed = async () =>
    Number((await database.db.selectFrom('maintenance_passes').select('through_id').where('name', '=', BODY_MASK_PASS).executeTakeFirstOrThrow()).through_id);
  t.equal(await passed(), 0, 'but not counted as read: it was received a moment ago');
  // That transaction commits now, under its lower id, with the CPF in clear.
  await sql`insert into callbacks (id, raw_body, outcome, error, peer) overriding system value
            values (${Number(taken!.id)}, ${Buffer.from(`{"b":"${cpf}"}`)}, 'invalid', 'e', '127.0.0.1')`.execute(database.db);
  t.same(await maskStoredBodies(database.db, hash, () => new Date(Date.now() + 2 * SETTLED_MS), never), { callbacks: 1 }, 'the next run reaches it');
  t.ok((await passed()) > Number(taken!.id), 'and counts both as read once settled');
  const dump = await dumpDatabase(database);
  t.notOk(dump.includes(cpf), 'nothing left in clear');
});

t.test('a start masks them by itself, and erasure by CPF then finds every one', async (t) => {
  const database = await freshDatabase(t);
  const cpf = cpfFrom('733901552');
  await storedAsBefore(database, cpf, 'start');
  const { app, logs } = await buildTestApp(t, { database });
  await app.ready();
  const said = await until(() => logs.entries().find((e) => /now masked/.test(String(e.msg))), 20_000, 'the pass at start');
  t.same(said.rewritten, { callbacks: 3 });
  t.notOk(logs.text().includes(cpf), 'no log line holds the CPF');

  const { app: admin } = await adminApp(t, { database });
  const erased = await post(admin, '/v1/personal-data/erase', { cpf });
  t.same(erased.json().erased, { requests: 1, callbacks: 3, events: 0 }, 'its request and result, and both invalid callbacks (one naming another customer)');
  const dump = await dumpDatabase(database);
  for (const form of dumpForms(hashCpf(cpf, TEST_CPF_HASH_KEY))) t.notOk(dump.includes(form), 'no hash of the CPF is left');
  t.ok(dump.includes(Buffer.from('no-cpf-here').toString('hex')), 'the callback that named nobody stays');
});

/**
 * The pass under an earlier name read every stored row and was over a month ago; the pass as it is
 * reads them all again: every row rewritten. The rows after it.
 */
async function readAgainAfter(t: Test, database: Awaited<ReturnType<typeof freshDatabase>>, earlierName: string) {
  const stored = await database.db.selectFrom('callbacks').select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow();
  const last = await database.db.selectFrom('callbacks').select('id').orderBy('id', 'desc').executeTakeFirstOrThrow();
  await database.db
    .insertInto('maintenance_passes')
    .values({ name: earlierName, through_id: Number(last.id), finished_at: new Date(Date.now() - 30 * 86_400_000) })
    .execute();
  const settled = () => new Date(Date.now() + 2 * SETTLED_MS);
  t.same(await maskStoredBodies(database.db, hash, settled, never), { callbacks: Number(stored.n) }, 'every one read again and masked');
  return database.db.selectFrom('callbacks').select(['raw_body', 'cpf_hashes']).orderBy('id').execute();
}

t.test("rows the pass read before other scripts' escaped digits counted are read once more", async (t) => {
  const database = await freshDatabase(t);
  const cpf = cpfFrom('718293046');
  const references = [...cpf].map((d) => `&#${0x6f0 + Number(d)};`).join('');
  const percent = encodeURIComponent([...cpf].map((d) => String.fromCodePoint(0x966 + Number(d))).join(''));
  await insertInvalid(database.db, { customerUuid: null, raw: `{"note":"titular ${references}"}` });
  await insertInvalid(database.db, { customerUuid: null, raw: `{"link":"https://crm.example/c?id=${percent}"}` });
  const rows = await readAgainAfter(t, database, 'callback_body_cpfs_2');
  t.same(
    rows.map((row) => Buffer.from(row.raw_body).toString('utf8')),
    ['{"note":"titular ***********"}', '{"link":"https://crm.example/c?id=***********"}'],
    'each escaped digit is one star',
  );
  for (const row of rows) t.same(row.cpf_hashes, [hashCpf(cpf, TEST_CPF_HASH_KEY)], 'its hash kept: erasure by CPF finds it');
});

t.test("rows the pass read before code point escapes and references without ';' counted are read once more", async (t) => {
  const database = await freshDatabase(t);
  const cpf = cpfFrom('640215387');
  const braces = [...cpf].map((d) => `\\u{${(0x660 + Number(d)).toString(16)}}`).join('');
  const references = [...cpf].map((d) => `&#${48 + Number(d)}`).join('');
  await insertInvalid(database.db, { customerUuid: null, raw: `{"note":"titular ${braces}"}` });
  await insertInvalid(database.db, { customerUuid: null, raw: `{"note":"titular ${references} ok"}` });
  const rows = await readAgainAfter(t, database, 'callback_body_cpfs_3');
  t.same(
    rows.map((row) => Buffer.from(row.raw_body).toString('utf8')),
    ['{"note":"titular ***********"}', '{"note":"titular *********** ok"}'],
    'each escaped digit is one star',
  );
  for (const row of rows) t.same(row.cpf_hashes, [hashCpf(cpf, TEST_CPF_HASH_KEY)], 'its hash kept: erasure by CPF finds it');
});

t.test("rows the pass read before Python's \\U, escape()'s %u and code point escapes of surrogate halves counted are read once more", async (t) => {
  const database = await freshDatabase(t);
  const cpf = cpfFrom('502813647');
  const astral = [...cpf].map((d) => String.fromCodePoint(0x1d7ce + Number(d)));
  const python = astral.map((c) => `\\U${c.codePointAt(0)!.toString(16).padStart(8, '0')}`).join('');
  const halves = astral.map((c) => `\\u{${c.charCodeAt(0).toString(16)}}\\u{${c.charCodeAt(1).toString(16)}}`).join('');
  await insertInvalid(database.db, { customerUuid: null, raw: `{"note":"titular ${python}"}` });
  await insertInvalid(database.db, { customerUuid: null, raw: `{"link":"https://crm.example/c?id=${escape(astral.join(''))}"}` });
  await insertInvalid(database.db, { customerUuid: null, raw: `{"note":"titular ${halves} ok"}` });
  const rows = await readAgainAfter(t, database, 'callback_body_cpfs_4');
  t.same(
    rows.map((row) => Buffer.from(row.raw_body).toString('utf8')),
    ['{"note":"titular ***********"}', '{"link":"https://crm.example/c?id=***********"}', '{"note":"titular *********** ok"}'],
    'each escaped digit is one star',
  );
  for (const row of rows) t.same(row.cpf_hashes, [hashCpf(cpf, TEST_CPF_HASH_KEY)], 'its hash kept: erasure by CPF finds it');
});

t.test('rows the pass read under the rule before invisible characters counted are read once more', async (t) => {
  const database = await freshDatabase(t);
  const cpf = cpfFrom('581204973');
  const hidden = [...cpf].join('\u200b');
  await insertInvalid(database.db, { customerUuid: null, raw: `{"note":"titular ${[...cpf].join('\u2060')}"}` });
  await insertInvalid(database.db, { customerUuid: null, raw: `{"note":"titular ${hidden}"}` });
  const rows = await readAgainAfter(t, database, 'callback_body_cpfs');
  for (const row of rows) {
    const text = Buffer.from(row.raw_body).toString('utf8').replace(/\\u20(?:0b|60)|[\u200b\u2060]/g, '');
    t.notOk(text.includes(cpf), `no CPF left once its invisible characters go: ${JSON.stringify(text)}`);
    t.same(row.cpf_hashes, [hashCpf(cpf, TEST_CPF_HASH_KEY)], 'its hash kept: erasure by CPF finds it');
  }
});
