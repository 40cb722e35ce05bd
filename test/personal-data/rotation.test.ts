import t from 'tap';
import { hashCpf } from '../../src/cpf.js';
import { TEST_CPF_HASH_KEY } from '../helpers/app.js';
import { freshDatabase } from '../helpers/database.js';
import { insertRequest, distinctResult } from '../queries/fixtures.js';
import { submitGateway, validRequest } from '../submissions/fixtures.js';
import { ADMIN_KEY, post } from './fixtures.js';

const OLD_KEY = TEST_CPF_HASH_KEY;
const NEW_KEY = 'rotated-cpf-hash-key-0123456789abcdef';
const CPF = '39053344705';

t.test('after rotation, requests hashed under the old key are found by lookup, export and erasure; new ones use the new key', async (t) => {
  const database = await freshDatabase(t);
  // Stored before the rotation, under the old (then only) key.
  await insertRequest(database.db, { customerUuid: 'rotate-old', cpf: CPF, result: distinctResult('rotate-old'), submittedAt: '2026-01-01T00:00:00Z' });

  const onlyNew = await submitGateway(t, { database, env: { CPF_HASH_KEY: NEW_KEY, ADMIN_API_KEYS: ADMIN_KEY } });
  const lost = await post(onlyNew.app, '/v1/underwritings/lookup', { cpf: CPF }, null);
  t.same(lost.json().items, [], 'with the old key dropped, the old request is unfindable by CPF');

  const { app, submit } = await submitGateway(t, { database, env: { CPF_HASH_KEY: `${NEW_KEY},${OLD_KEY}`, ADMIN_API_KEYS: ADMIN_KEY } });
  const submitted = await submit(validRequest({ customerUuid: 'rotate-new', cpf: CPF }));
  t.equal(submitted.statusCode, 202);
  const stored = await database.db.selectFrom('underwriting_requests').select(['customer_uuid', 'cpf_hash']).orderBy('id').execute();
  t.same(stored, [
    { customer_uuid: 'rotate-old', cpf_hash: hashCpf(CPF, OLD_KEY) },
    { customer_uuid: 'rotate-new', cpf_hash: hashCpf(CPF, NEW_KEY) },
  ], 'the first key hashes new requests');

  const found = await post(app, '/v1/underwritings/lookup', { cpf: CPF }, null);
  t.same(found.json().items.map((r: { customerUuid: string }) => r.customerUuid), ['rotate-new', 'rotate-old'], 'lookup matches under both keys');
  const exported = await post(app, '/v1/personal-data/export', { cpf: CPF });
  t.same(exported.json().customerUuids, ['rotate-new', 'rotate-old']);

  // The new request awaits its callback; once it expires, both go.
  await database.db.updateTable('underwriting_requests').set({ status: 'expired' }).where('customer_uuid', '=', 'rotate-new').execute();
  const erased = await post(app, '/v1/personal-data/erase', { cpf: CPF });
  t.same(erased.json(), { erased: { requests: 2, callbacks: 1, events: 0 } });
  t.same(await database.db.selectFrom('underwriting_requests').select('id').execute(), []);
});
