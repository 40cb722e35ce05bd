import t from 'tap';
import { CPF, storedKeys, storedRequests, submitGateway, validRequest } from './fixtures.js';

// One gateway for the whole file: every case must leave the database and the provider untouched.
const gw = await submitGateway(t);

const valid = validRequest();
const { customerUuid: _omitted, ...withoutCustomer } = valid;

const cases: Array<{ name: string; body: unknown; paths: string[]; headers?: Record<string, string> }> = [
  { name: 'a missing field', body: withoutCustomer, paths: ['customerUuid'] },
  { name: 'a cpf with dots and dash', body: { ...valid, cpf: '529.982.247-25' }, paths: ['cpf'] },
  { name: 'a cpf of 10 digits', body: { ...valid, cpf: '5299822472' }, paths: ['cpf'] },
  { name: 'a cpf given as a number', body: { ...valid, cpf: 52998224725 }, paths: ['cpf'] },
  { name: 'a customerUuid with forbidden characters', body: { ...valid, customerUuid: 'abc def/1' }, paths: ['customerUuid'] },
  { name: 'a customerUuid of 129 characters', body: { ...valid, customerUuid: 'a'.repeat(129) }, paths: ['customerUuid'] },
  { name: 'an occupation outside the enumeration', body: { ...valid, srd: { ...valid.srd, occupation: 'Astronaut' } }, paths: ['srd.occupation'] },
  { name: 'srd without grossIncome', body: { ...valid, srd: { housingSpends: 10 } }, paths: ['srd.grossIncome'] },
  { name: 'a negative amount', body: { ...valid, srd: { ...valid.srd, cardSpends: -1 } }, paths: ['srd.cardSpends'] },
  { name: 'an unknown field at the top level', body: { ...valid, extra: 1 }, paths: ['extra'] },
  { name: 'an unknown field inside srd', body: { ...valid, srd: { ...valid.srd, pet: 'cat' } }, paths: ['srd.pet'] },
  // The path names what the client sent: a field named by a CPF is not echoed back.
  { name: 'an unknown field named by a CPF', body: { ...valid, [CPF]: 1 }, paths: ['[redacted]'] },
  {
    name: 'an unknown field inside address',
    body: { ...valid, srd: { ...valid.srd, address: { city: 'Recife', zip: '50000-000' } } },
    paths: ['srd.address.zip'],
  },
  { name: 'a NUL character in an address field', body: { ...valid, srd: { ...valid.srd, address: { street: 'a\u0000b' } } }, paths: ['srd.address.street'] },
  { name: 'a lone surrogate in an address field', body: { ...valid, srd: { ...valid.srd, address: { city: 'Reci\udfff' } } }, paths: ['srd.address.city'] },
  { name: 'a reversed surrogate pair in an address field', body: { ...valid, srd: { ...valid.srd, address: { state: '\udc00\ud800' } } }, paths: ['srd.address.state'] },
  { name: 'costSavingEnabled as a string', body: { ...valid, costSavingEnabled: 'true' }, paths: ['costSavingEnabled'] },
  { name: 'a body that is not JSON', body: '{"customerUuid": "x", "cpf": ', paths: [] },
  { name: 'an Idempotency-Key of 201 characters', body: valid, paths: ['idempotency-key'], headers: { 'idempotency-key': 'k'.repeat(201) } },
  { name: 'an empty Idempotency-Key', body: valid, paths: ['idempotency-key'], headers: { 'idempotency-key': '' } },
];

for (const c of cases) {
  t.test(`${c.name} is refused 400 naming the bad path; nothing stored, nothing sent`, async (t) => {
    const res = await gw.submit(c.body, c.headers);
    t.equal(res.statusCode, 400);
    const body = res.json();
    t.equal(body.error, 'validation_failed');
    t.type(body.message, 'string');
    t.same(
      body.issues.map((i: { path: string }) => i.path),
      c.paths,
    );
    t.equal(gw.provider.received.length, 0);
    t.equal((await storedRequests(gw.database)).length, 0);
    t.equal((await storedKeys(gw.database)).length, 0);
  });
}

t.test('JSON sent as text/plain is refused 415 unsupported_media_type; nothing stored, nothing sent', async (t) => {
  const res = await gw.app.inject({
    method: 'POST',
    url: '/v1/underwritings',
    headers: { 'content-type': 'text/plain' },
    payload: JSON.stringify({ customerUuid: 'plain-1', cpf: CPF, costSavingEnabled: false }),
  });
  t.equal(res.statusCode, 415);
  t.same(res.json(), {
    error: 'unsupported_media_type',
    message: 'content-type text/plain is not accepted: send the body as application/json',
  });
  t.equal(gw.provider.received.length, 0);
  t.equal((await storedRequests(gw.database)).length, 0);
});

t.test('a content type holding a CPF is refused 415 without echoing it', async (t) => {
  for (const type of ['application/x-529.982.247-25', `text/${CPF}`]) {
    const res = await gw.app.inject({
      method: 'POST',
      url: '/v1/underwritings',
      headers: { 'content-type': type },
      payload: JSON.stringify({ customerUuid: 'plain-2', cpf: CPF, costSavingEnabled: false }),
    });
    t.equal(res.statusCode, 415, type);
    t.match(res.json(), { error: 'unsupported_media_type', message: /^content-type \S*\[redacted\] is not accepted/ }, type);
    t.notMatch(res.body, /529\D{0,3}982\D{0,3}247\D{0,3}25/, `${type}: not echoed`);
  }
  t.equal(gw.provider.received.length, 0);
});

t.test('refused bodies never put the CPF in the logs', async (t) => {
  t.notMatch(gw.logs.text(), CPF);
  t.notMatch(gw.logs.text(), '5299822472');
});
