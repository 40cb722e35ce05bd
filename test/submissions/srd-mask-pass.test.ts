import { sql } from 'kysely';
import t from 'tap';
import { formatCpf } from '../../src/cpf.js';
import { PASS_GOES_ON_MS } from '../../src/db/maintenance-pass.js';
import { maskStoredSrd, SRD_MASK_PASSES } from '../../src/submissions/srd-mask-pass.js';
import { buildTestApp } from '../helpers/app.js';
import { cpfFrom } from '../helpers/cpf.js';
import { freshDatabase } from '../helpers/database.js';
import { insertRequest } from '../helpers/rows.js';
import { until } from '../helpers/until.js';
import { dumpDatabase, dumpForms } from '../personal-data/fixtures.js';

// srd text stored before the free-text rule (src/cpf.ts) read a CPF written with other scripts'
// digits, escapes, groups or invisible characters kept it in clear, in the request and in its
// events' copies (migration 0015 masked only what its own rule read). A pass masks them under the rule as it is.

const never = new AbortController().signal;
const settled = () => new Date(Date.now() + 120_000);

/** Every form below holds the CPF; migration 0015's rule (ASCII digits, at most two of `.`, `-`, space between) reads none of them. */
function hiddenForms(cpf: string): Record<string, string> {
  return {
    street: `Rua ${[...cpf].join('\u200b')}`,
    complement: `cpf ${[...formatCpf(cpf)].map((c) => (/[0-9]/.test(c) ? String.fromCharCode(c.charCodeAt(0) + 0xfee0) : c)).join('')}`,
    city: `${cpf.slice(0, 3)} ; ${cpf.slice(3, 6)} ; ${cpf.slice(6, 9)} ; ${cpf.slice(9)}`,
  };
}

/** A request and its event as a version before stored them, srd text and all. */
async function storedAsBefore(database: Awaited<ReturnType<typeof freshDatabase>>, customerUuid: string, cpf: string): Promise<number> {
  const srd = { grossIncome: 1, address: { ...hiddenForms(cpf), number: '42', state: 'SP' } };
  const id = await insertRequest(database.db, { customerUuid, srd });
  await sql`insert into events (public_id, type, customer_uuid, created_at, request_id, data)
    values (${`evt_${customerUuid}`}, 'underwriting.submitted', ${customerUuid}, now(), ${id}, ${JSON.stringify({ customerUuid, srd })}::jsonb)`.execute(database.db);
  return id;
}

/** The stored text with its invisible characters and fullwidth digits read as what they show. */
function asShown(text: string): string {
  return text.replace(/\\u200b|\u200b/gi, '').replace(/[\uff10-\uff19]/g, (c) => String.fromCharCode(c.charCodeAt(0) - 0xfee0));
}

t.test('the pass masks CPFs in stored srd text and in its events, keeps the rest, and is over once it has gone on long enough', async (t) => {
  const database = await freshDatabase(t);
  const cpf = cpfFrom('640217385');
  await storedAsBefore(database, 'srd-pass-1', cpf);
  await insertRequest(database.db, { customerUuid: 'srd-pass-plain', srd: { grossIncome: 2, address: { street: 'Rua 7', number: '12345678901' } } });
  const before = asShown(await dumpDatabase(database));
  t.ok(dumpForms(cpf).some((form) => before.includes(form)) || before.includes(cpf), 'planted before');

  t.same(await maskStoredSrd(database.db, settled, never), { requests: 1, events: 1 }, 'the request and its event');
  const after = asShown(await dumpDatabase(database));
  for (const form of [cpf, formatCpf(cpf), ...dumpForms(cpf)]) t.notOk(after.includes(form), `no ${form} left`);
  const [request] = (await sql<{ srd: { address: Record<string, string> } }>`select srd from underwriting_requests where customer_uuid = 'srd-pass-1'`.execute(database.db)).rows;
  t.same(request!.srd.address, {
    street: `Rua ${Array(11).fill('*').join('\u200b')}`,
    complement: 'cpf ***.***.***-**',
    city: '*** ; *** ; *** ; **',
    number: '42',
    state: 'SP',
  }, 'digits masked, separators and other fields kept');
  const [event] = (await sql<{ data: { srd: unknown; customerUuid: string } }>`select data from events`.execute(database.db)).rows;
  t.same(event!.data, { customerUuid: 'srd-pass-1', srd: request!.srd }, "the event's copy masked the same, the rest of its data kept");
  const [plain] = (await sql<{ srd: unknown }>`select srd from underwriting_requests where customer_uuid = 'srd-pass-plain'`.execute(database.db)).rows;
  t.same(plain!.srd, { grossIncome: 2, address: { street: 'Rua 7', number: '12345678901' } }, 'eleven digits that are no CPF stay');

  const passes = await database.db.selectFrom('maintenance_passes').selectAll().where('name', 'in', Object.values(SRD_MASK_PASSES)).execute();
  t.equal(passes.length, 2);
  t.ok(passes.every((p) => p.finished_at), 'both finished');
  await storedAsBefore(database, 'srd-pass-2', cpfFrom('318950264'));
  t.same(await maskStoredSrd(database.db, settled, never), { requests: 1, events: 1 }, 'a later start goes on from there: only what a version before wrote since');
  const later = new Date(Math.max(...passes.map((p) => p.finished_at!.getTime())) + PASS_GOES_ON_MS + 1000);
  t.equal(await maskStoredSrd(database.db, () => later, never), undefined, 'over once it has gone on long enough');
});

t.test('a start masks them by itself', async (t) => {
  const database = await freshDatabase(t);
  const cpf = cpfFrom('902731546');
  await storedAsBefore(database, 'srd-start-1', cpf);
  const { app, logs } = await buildTestApp(t, { database });
  await app.ready();
  const said = await until(() => logs.entries().find((e) => /srd text an earlier version stored are now masked/.test(String(e.msg))), 20_000, 'the pass at start');
  t.same(said.rewritten, { requests: 1, events: 1 });
  t.notOk(asShown(logs.text()).includes(cpf), 'no log line holds the CPF');
  const after = asShown(await dumpDatabase(database));
  t.notOk(after.includes(cpf), 'nothing left in clear');
});

t.test("srd text the pass read before other scripts' escaped digits counted is read once more, even when they hold no ASCII digit", async (t) => {
  const database = await freshDatabase(t);
  // Gujarati 4-9 as hexadecimal references (`&#xaea;`): not one ASCII digit in the whole CPF.
  const cpf = cpfFrom('444475898');
  const street = `Rua ${[...cpf].map((d) => `&#x${(0xae6 + Number(d)).toString(16)};`).join('')}`;
  const number = encodeURIComponent([...cpfFrom('730158264')].map((d) => String.fromCodePoint(0x660 + Number(d))).join(''));
  const id = await insertRequest(database.db, { customerUuid: 'srd-escaped-script', srd: { grossIncome: 1, address: { street, number } } });
  for (const name of ['srd_cpfs_requests', 'srd_cpfs_events']) {
    await database.db.insertInto('maintenance_passes').values({ name, through_id: id, finished_at: new Date(Date.now() - 30 * 86_400_000) }).execute();
  }
  t.same(await maskStoredSrd(database.db, settled, never), { requests: 1, events: 0 });
  const [request] = (await sql<{ srd: { address: Record<string, string> } }>`select srd from underwriting_requests where id = ${id}`.execute(database.db)).rows;
  t.same(request!.srd.address, { street: 'Rua ***********', number: '***********' }, 'each escaped digit one star');
});
