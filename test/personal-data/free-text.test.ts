import { sql } from 'kysely';
import t from 'tap';
import { up as maskStoredCpfs } from '../../migrations/0015_mask_free_text_cpfs.js';
import { formatCpf, isValidCpf, maskCpfsInText } from '../../src/cpf.js';
import { buildTestApp, listen, testConfig } from '../helpers/app.js';
import { cpfFrom } from '../helpers/cpf.js';
import { httpRequest } from '../helpers/http.js';
import { freshDatabase, SERVER_URL } from '../helpers/database.js';
import { postCallback, resultBody } from '../callbacks/fixtures.js';
import { pushEnv, webhookSecret } from '../events/fixtures.js';
import { startReceiver } from '../events/receiver.js';
import { startFakeProvider } from '../submissions/provider.js';
import { CPF, validRequest } from '../submissions/fixtures.js';
import { ADMIN_KEY, dumpDatabase, dumpForms } from './fixtures.js';

// Issue 32: CPFs typed where no CPF belongs (srd text, customerUuid, X-Request-Id, a proxy's
// X-Forwarded-For) were stored, returned, pushed and logged in clear.

const PLANTED = {
  street: cpfFrom('712345678'),
  complement: cpfFrom('318204557'),
  city: cpfFrom('604172839'),
  state: cpfFrom('205830461'),
  number: cpfFrom('990123447'),
  requestId: cpfFrom('481516234'),
  forwardedFor: cpfFrom('271828182'),
  customerUuid: cpfFrom('314159265'),
  fullwidth: cpfFrom('161803398'),
};

/** Text as a fullwidth keyboard types it: ０-９ and ．－／ for their ASCII forms. */
function fullwidth(text: string): string {
  return text.replace(/[0-9./-]/g, (c) => String.fromCharCode(c.charCodeAt(0) + 0xfee0));
}

/** Every form of a planted CPF a reader could find: bare, formatted, spaced. */
function formsOf(cpf: string): string[] {
  return [cpf, formatCpf(cpf), `${cpf.slice(0, 3)} ${cpf.slice(3, 6)} ${cpf.slice(6, 9)} ${cpf.slice(9)}`, fullwidth(cpf), fullwidth(formatCpf(cpf))];
}

/** The planted CPFs (their forms) found in text, for a failing assertion that says which. */
function plantedIn(text: string): string[] {
  return Object.entries(PLANTED).flatMap(([where, cpf]) =>
    formsOf(cpf).flatMap((form) => dumpForms(form)).filter((form) => text.includes(form)).map((form) => `${where}: ${form}`),
  );
}

t.test('free-text masking: every valid CPF in any common writing, nothing else', async (t) => {
  const cpf = PLANTED.street;
  t.ok(isValidCpf(cpf));
  t.notOk(isValidCpf(`${cpf.slice(0, 10)}${(Number(cpf[10]) + 1) % 10}`), 'a wrong check digit is no CPF');
  t.equal(maskCpfsInText(`Rua ${cpf}`), 'Rua ***********');
  t.equal(maskCpfsInText(`cpf ${formatCpf(cpf)} ok`), 'cpf ***.***.***-** ok');
  t.equal(maskCpfsInText(`${cpf.slice(0, 3)} ${cpf.slice(3, 6)} ${cpf.slice(6, 9)} ${cpf.slice(9)}`), '*** *** *** **');
  t.equal(maskCpfsInText(`9 ${cpf}`), `9 ***********`, 'a digit typed before it does not hide it');
  t.equal(maskCpfsInText(`apto ${cpf.slice(0, 10)}`), `apto ${cpf.slice(0, 10)}`, 'ten digits stay');
  const notCpf = `${cpf.slice(0, 10)}${(Number(cpf[10]) + 1) % 10}`;
  t.equal(maskCpfsInText(`tel ${notCpf}`), `tel ${notCpf}`, 'eleven digits that are no CPF stay');
  t.equal(maskCpfsInText('Rua das Flores, 42'), 'Rua das Flores, 42');
  t.equal(maskCpfsInText(`cpf ${fullwidth(cpf)}`), 'cpf ***********', 'fullwidth digits');
  t.equal(maskCpfsInText(`cpf ${fullwidth(formatCpf(cpf))}`), 'cpf ***．***．***－**', 'fullwidth digits and separators; the separators stay');
  t.equal(maskCpfsInText(`cpf ${cpf.slice(0, 5)}${fullwidth(cpf.slice(5))}`), 'cpf ***********', 'digits of both widths in one run');
  t.equal(maskCpfsInText(fullwidth(notCpf)), fullwidth(notCpf), 'eleven fullwidth digits that are no CPF stay');
});

t.test('a customerUuid that is a CPF is refused unless CUSTOMER_UUID_ALLOW_CPF=true', async (t) => {
  const provider = await startFakeProvider(t);
  const database = await freshDatabase(t);
  const strict = await buildTestApp(t, { database, env: { PROVIDER_BASE_URL: provider.url } });
  for (const customerUuid of [PLANTED.customerUuid, `${PLANTED.customerUuid.slice(0, 3)}-${PLANTED.customerUuid.slice(3)}`]) {
    const res = await strict.app.inject({ method: 'POST', url: '/v1/underwritings', payload: validRequest({ customerUuid }) });
    t.equal(res.statusCode, 400, customerUuid);
    t.equal(res.json().issues[0].path, 'customerUuid');
    t.match(res.json().issues[0].message, /must not be a CPF.*CUSTOMER_UUID_ALLOW_CPF=true/);
    t.equal(plantedIn(res.body).length, 0, 'the refusal does not echo it');
  }
  t.equal(provider.received.length, 0, 'nothing sent');
  t.equal(plantedIn(strict.logs.text()).length, 0, 'nor logged');
  const notCpf = `${PLANTED.customerUuid.slice(0, 10)}${(Number(PLANTED.customerUuid[10]) + 1) % 10}`;
  const plain = await strict.app.inject({ method: 'POST', url: '/v1/underwritings', payload: validRequest({ customerUuid: notCpf }) });
  t.equal(plain.statusCode, 202, 'eleven digits that are no CPF are an identifier like any other');

  t.equal(testConfig({ CUSTOMER_UUID_ALLOW_CPF: 'true' }).customerUuidAllowCpf, true);
  t.equal(testConfig().customerUuidAllowCpf, false, 'refused by default');
  const lenient = await buildTestApp(t, { database, env: { PROVIDER_BASE_URL: provider.url, CUSTOMER_UUID_ALLOW_CPF: 'true' } });
  const accepted = await lenient.app.inject({ method: 'POST', url: '/v1/underwritings', payload: validRequest({ customerUuid: PLANTED.customerUuid }) });
  t.equal(accepted.statusCode, 202, 'accepted when the partner says its identifiers are 11-digit numbers');
});

t.test('CPFs planted in srd text, X-Request-Id and X-Forwarded-For reach no log, row, answer or pushed event', async (t) => {
  const provider = await startFakeProvider(t);
  const receiver = await startReceiver(t);
  const database = await freshDatabase(t);
  const { app, logs } = await buildTestApp(t, {
    database,
    env: {
      PROVIDER_BASE_URL: provider.url,
      TRUST_PROXY: '127.0.0.1/32',
      ADMIN_API_KEYS: ADMIN_KEY,
      ...pushEnv([receiver.url], webhookSecret()),
    },
  });
  const base = await listen(app);
  const customerUuid = 'free-text-1';
  const body = validRequest({
    customerUuid,
    srd: {
      grossIncome: 1000,
      address: {
        street: `Rua ${PLANTED.street}`,
        complement: `cpf ${formatCpf(PLANTED.complement)}, ${fullwidth(formatCpf(PLANTED.fullwidth))}`,
        city: formsOf(PLANTED.city)[2],
        state: `${PLANTED.state.slice(0, 3)}-${PLANTED.state.slice(3, 6)}-${PLANTED.state.slice(6, 9)}.${PLANTED.state.slice(9)}`,
        number: PLANTED.number,
      },
    },
  });
  const submitted = await httpRequest(`${base}/v1/underwritings`, {
    body,
    headers: { 'x-request-id': PLANTED.requestId, 'x-forwarded-for': `${PLANTED.forwardedFor}, 127.0.0.1` },
  });
  t.equal(submitted.status, 202, submitted.text);
  t.not(submitted.headers['x-request-id'], PLANTED.requestId, 'a CPF-shaped request id is replaced, not echoed');
  t.match(submitted.headers['x-request-id'], /^[0-9a-f-]{36}$/);
  t.equal(plantedIn(provider.received[0]!.headers['x-request-id'] as string ?? '').length, 0, 'nor forwarded');

  const callback = await postCallback(app, resultBody(customerUuid, { started: new Date().toISOString(), finished: new Date().toISOString() }));
  t.equal(callback.statusCode, 200);
  const [pushed] = await receiver.waitFor((r) => r.json.type === 'underwriting.completed');

  const answers = [
    (await httpRequest(`${base}/v1/underwritings/${customerUuid}`)).text,
    (await httpRequest(`${base}/v1/underwritings?limit=10`)).text,
    (await httpRequest(`${base}/v1/underwritings/lookup`, { body: { cpf: CPF } })).text,
    (await httpRequest(`${base}/v1/personal-data/export`, { body: { customerUuid }, headers: { authorization: `Bearer ${ADMIN_KEY}` } })).text,
    (await httpRequest(`${base}/v1/events?limit=10`)).text,
  ];
  t.match(answers[0], /\*\*\*\.\*\*\*\.\*\*\*-\*\*/, 'the formatted CPF is masked in place');
  for (const [i, answer] of answers.entries()) t.same(plantedIn(answer), [], `answer ${i}`);
  t.ok(pushed, 'an event was pushed');
  t.same(plantedIn(receiver.received.map((r) => r.body).join('\n')), [], 'pushed events');
  t.same(plantedIn(logs.text()), [], 'logs');
  t.ok(logs.entries().some((e) => (e.req as { client?: string } | undefined)?.client === '127.0.0.1'), 'the client logged is an address');
  t.same(plantedIn(await dumpDatabase(database)), [], SERVER_URL ? 'pg_dump and every row' : 'every row');
});

t.test('migration 0015 masks CPFs stored in srd text (and in events) before masking at the door', async (t) => {
  const database = await freshDatabase(t);
  const srd = { grossIncome: 1, address: { street: `Rua ${formatCpf(PLANTED.street)}`, number: '42', city: 'tel 11 98765-4321' } };
  const { rows } = await sql<{ id: number }>`
    insert into underwriting_requests (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, srd, status)
    values ('old-1', 'h', '***.456.789-**', false, ${JSON.stringify(srd)}::jsonb, 'submitted') returning id`.execute(database.db);
  await sql`
    insert into events (public_id, type, customer_uuid, created_at, request_id, data)
    values ('evt_old1', 'underwriting.completed', 'old-1', now(), ${rows[0]!.id}, ${JSON.stringify({ customerUuid: 'old-1', srd })}::jsonb)`.execute(database.db);
  t.not(plantedIn(await dumpDatabase(database)).length, 0, 'planted before');
  await maskStoredCpfs(database.db as never);
  t.same(plantedIn(await dumpDatabase(database)), [], 'gone after');
  const after = await sql<{ srd: typeof srd }>`select srd from underwriting_requests`.execute(database.db);
  t.same(after.rows[0]!.srd.address, { street: 'Rua ***.***.***-**', number: '42', city: 'tel 11 98765-4321' }, 'the rest of the text stays');
});

t.test('a request id holding a CPF between any of its separators (. - _ :) is replaced, never echoed or logged', async (t) => {
  const { app, logs } = await buildTestApp(t);
  const cpf = cpfFrom('161803398');
  const shapes = [cpf, `${cpf.slice(0, 3)}.${cpf.slice(3, 6)}.${cpf.slice(6, 9)}-${cpf.slice(9)}`, `${cpf.slice(0, 3)}_${cpf.slice(3, 6)}_${cpf.slice(6, 9)}:${cpf.slice(9)}`, `req:${cpf.slice(0, 9)}_${cpf.slice(9)}`];
  for (const id of shapes) {
    const res = await app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': id } });
    t.not(res.headers['x-request-id'], id, `${id} is not echoed`);
    t.match(res.headers['x-request-id'], /^[0-9a-f-]{36}$/, 'a generated id instead');
  }
  const kept = await app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': 'order_2026:17' } });
  t.equal(kept.headers['x-request-id'], 'order_2026:17', 'an id with no CPF in it is kept');
  t.notMatch(JSON.stringify(logs.entries()), new RegExp(cpf.slice(0, 9)), 'no log line holds it');
});
