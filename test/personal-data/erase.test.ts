import t from 'tap';
import { formatCpf, hashCpf, maskCpf } from '../../src/cpf.js';
import { TEST_CPF_HASH_KEY } from '../helpers/app.js';
import { ENGINE, freshDatabase } from '../helpers/database.js';
import { postCallback, resultBody as callbackBody } from '../callbacks/fixtures.js';
import { insertRequest, distinctResult, storeResult } from '../queries/fixtures.js';
import { keyAsStored } from '../submissions/fixtures.js';
import { adminApp, dumpDatabase, dumpForms, insertInvalid, post, rowCounts, seedSubject } from './fixtures.js';

// One database for the file (every test has its own customers and CPFs): a fresh PGlite costs seconds.
const database = await freshDatabase(t);
const NEW_KEY = 'rotated-cpf-hash-key-0123456789abcdef';
const env = { CPF_HASH_KEY: `${NEW_KEY},${TEST_CPF_HASH_KEY}` };

t.test('erasure is refused 409 in_flight while a request awaits its callback, and nothing is erased', async (t) => {
  const { app } = await adminApp(t, { database, env });
  const cpf = '39053344705';
  await seedSubject(database.db, 'erase-flight-1', cpf);
  const waiting = await insertRequest(database.db, { customerUuid: 'erase-flight-1', cpf, status: 'submitted' });
  const before = await rowCounts(database.db);

  for (const body of [{ cpf }, { customerUuid: 'erase-flight-1' }]) {
    const refused = await post(app, '/v1/personal-data/erase', body);
    t.equal(refused.statusCode, 409);
    t.equal(refused.json().error, 'in_flight');
  }
  t.same(await rowCounts(database.db), before, 'nothing erased, nothing audited');

  await storeResult(database.db, waiting, distinctResult('erase-flight-1'));
  const erased = await post(app, '/v1/personal-data/erase', { customerUuid: 'erase-flight-1' });
  t.equal(erased.statusCode, 200);
  // 3 requests; callbacks: 2 results, 1 unmatched, 1 invalid.
  t.same(erased.json(), { erased: { requests: 3, callbacks: 4, events: 2 } });
  const export404 = await post(app, '/v1/personal-data/export', { cpf });
  t.equal(export404.statusCode, 404, 'nothing left to export');
  const again = await post(app, '/v1/personal-data/erase', { cpf });
  t.same(again.json(), { erased: { requests: 0, callbacks: 0, events: 0 } }, 'erasing again finds nothing');
});

t.test('after erasure by CPF a dump of the database holds nothing of the subject', async (t) => {
  const { app } = await adminApp(t, { database, env });
  const cpf = '86288366757';
  const other = '71428793860';
  await seedSubject(database.db, 'erase-dump-1', cpf);
  // The same person under a second customerUuid, hashed under the rotated key.
  await insertRequest(database.db, { customerUuid: 'erase-dump-2', cpf, status: 'submit_failed' });
  await database.db
    .updateTable('underwriting_requests')
    .set({ cpf_hash: hashCpf(cpf, NEW_KEY), upstream_error: `provider said: cpf ${formatCpf(cpf)} refused` })
    .where('customer_uuid', '=', 'erase-dump-2')
    .execute();
  // Callbacks naming no customer: truncated bytes that still name this one, and unrelated ones.
  await insertInvalid(database.db, { customerUuid: null, raw: `{"customerUuid":"erase-dump-1","cpf":"${cpf}` });
  await insertInvalid(database.db, { customerUuid: null, raw: `{"note":"cpf ${formatCpf(cpf)}` });
  await insertInvalid(database.db, { customerUuid: null, raw: '{"customerUuid":"someone-else-entirely' });
  // Someone else, who must stay.
  await seedSubject(database.db, 'erase-dump-keep', other);
  // A lookup first, so its audit entry is in the dump too.
  const lookup = await post(app, '/v1/underwritings/lookup', { cpf }, null);
  t.equal(lookup.json().items.length, 3);

  const erased = await post(app, '/v1/personal-data/erase', { cpf });
  t.equal(erased.statusCode, 200);
  // 3 requests; callbacks: 1 result, 1 unmatched, 1 invalid naming the customer, 2 naming nobody.
  t.same(erased.json(), { erased: { requests: 3, callbacks: 5, events: 2 } });

  const dump = await dumpDatabase(database);
  const traces = [
    'erase-dump-1',
    'erase-dump-2',
    cpf,
    formatCpf(cpf),
    maskCpf(cpf),
    hashCpf(cpf, NEW_KEY),
    hashCpf(cpf, TEST_CPF_HASH_KEY),
    `idem-erase-dump-1`,
  ];
  for (const trace of traces) {
    for (const form of dumpForms(trace)) t.notOk(dump.includes(form), `the dump (${ENGINE}) does not contain ${trace} as ${form}`);
  }
  // The check can fail: the other subject, and the unrelated invalid callback, are still there.
  for (const kept of ['erase-dump-keep', maskCpf(other), hashCpf(other, TEST_CPF_HASH_KEY), Buffer.from('someone-else-entirely').toString('hex')]) {
    t.ok(dump.includes(kept), `the dump still holds ${kept}`);
  }
  t.match(dump, /erase/, 'the audit entries stay');
});

t.test('erasure by customerUuid takes only that customer, and its idempotency keys', async (t) => {
  const { app } = await adminApp(t, { database, env });
  const cpf = '52513127765';
  await seedSubject(database.db, 'erase-one-1', cpf);
  await seedSubject(database.db, 'erase-one-2', cpf);
  const erased = await post(app, '/v1/personal-data/erase', { customerUuid: 'erase-one-1' });
  t.same(erased.json(), { erased: { requests: 2, callbacks: 3, events: 2 } });
  const seeded = [keyAsStored('idem-erase-one-1'), keyAsStored('idem-erase-one-2')];
  const keys = await database.db.selectFrom('idempotency_keys').select('key').where('key', 'in', seeded).execute();
  t.same(keys.map((k) => k.key), [keyAsStored('idem-erase-one-2')]);
  const events = await database.db.selectFrom('event_deliveries').select('customer_uuid').where('customer_uuid', 'like', 'erase-one-%').execute();
  t.same([...new Set(events.map((e) => e.customer_uuid))], ['erase-one-2'], "the other customerUuid's events and deliveries stay");
  const left = await database.db.selectFrom('underwriting_requests').select('customer_uuid').where('cpf_hash', '=', hashCpf(cpf, TEST_CPF_HASH_KEY)).execute();
  t.same([...new Set(left.map((r) => r.customer_uuid))], ['erase-one-2'], "the other customerUuid's requests stay");
});

t.test('erasure counts in the metrics', async (t) => {
  const { app } = await adminApp(t, { database, env });
  await seedSubject(database.db, 'erase-metrics-1', '11144477735');
  await post(app, '/v1/personal-data/erase', { customerUuid: 'erase-metrics-1' });
  const metrics = (await app.inject({ method: 'GET', url: '/metrics' })).body;
  t.match(metrics, /underwriting_personal_data_erasures_total\{outcome="erased"\} 1/);
  t.match(metrics, /underwriting_personal_data_erased_rows_total\{table="underwriting_requests"\} 2/);
});

t.test('an erasure racing a late callback of an expired request: both succeed, and what stays is the new callback only', async (t) => {
  const { app } = await adminApp(t, { database, env });
  for (let round = 0; round < 5; round++) {
    const customerUuid = `erase-race-${round}`;
    await insertRequest(database.db, { customerUuid, cpf: '39053344705', status: 'expired', submittedAt: new Date(Date.now() - 60_000) });
    const [erased, callback] = await Promise.all([
      post(app, '/v1/personal-data/erase', { customerUuid }),
      postCallback(app, callbackBody(customerUuid, { started: new Date(Date.now() - 30_000).toISOString() })),
    ]);
    t.equal(erased.statusCode, 200, `round ${round}: the erasure succeeds`);
    t.equal(callback.statusCode, 200, `round ${round}: the callback is stored`);
    const requests = await database.db.selectFrom('underwriting_requests').select('id').where('customer_uuid', '=', customerUuid).execute();
    t.same(requests, [], 'the request is gone either way');
    const callbacks = await database.db.selectFrom('callbacks').select(['outcome', 'request_id']).where('customer_uuid', '=', customerUuid).execute();
    // Callback first: it completed the request and went with it. Erasure first: it arrived as new, unmatched data.
    t.ok(callbacks.length === 0 || (callbacks.length === 1 && callbacks[0]!.outcome === 'unmatched'), JSON.stringify(callbacks));
  }
});
