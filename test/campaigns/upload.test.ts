import net from 'node:net';
import { gzipSync } from 'node:zlib';
import { sql } from 'kysely';
import t from 'tap';
import { campaignUploader } from '../../src/campaigns/upload.js';
import { hashCpf } from '../../src/cpf.js';
import { submitBodySchema } from '../../src/submissions/schemas.js';
import { keyDigester } from '../../src/requests/key-digest.js';
import { sealerOf } from '../../src/submissions/seal.js';
import { buildTestApp, listen, TEST_CPF_HASH_KEY } from '../helpers/app.js';
import { freshDatabase, SERVER_URL } from '../helpers/database.js';
import { httpRequest } from '../helpers/http.js';
import { until } from '../helpers/until.js';
import { enqueueSubmits } from '../../src/submissions/queue.js';
import { dumpDatabase, dumpForms } from '../personal-data/fixtures.js';
import { CSV, cpfOf, get, line, NDJSON, ndjson, requestsOf, upload, holdTheProvider } from './fixtures.js';

// POST /v1/campaigns: every line validated as a submit, the valid ones queued, the others reported
// by line number; the same rules as a single submit (allowlist, keys, validation, in flight, CPFs).

const database = await freshDatabase(t);
const gw = await buildTestApp(t, { database });
// Nothing is forwarded here: the requests stay as uploaded (markForwarded plays the forwarder).
await holdTheProvider(database.db);
const { app } = gw;

/** The route's uploader on this file's database, as the gateway builds it, with the given limits. */
const uploaderWith = (limits?: Parameters<typeof campaignUploader>[0]['limits']) =>
  campaignUploader({
    db: database.db,
    clock: () => new Date(),
    schema: submitBodySchema(false),
    cpfHashKey: TEST_CPF_HASH_KEY,
    keyDigests: keyDigester([TEST_CPF_HASH_KEY]),
    sealer: sealerOf([TEST_CPF_HASH_KEY]),
    ...(limits ? { limits } : {}),
  });

t.test('an NDJSON file: valid lines are queued in the campaign, invalid ones reported by their line number', async (t) => {
  const body = ndjson([
    line('ndj-1', 1),
    '{"customerUuid": "ndj-2", "cpf": "not json',
    '',
    line('ndj-3', 3, { cpf: '123' }),
    line('ndj-4', 4, { extra: cpfOf(44) }),
    line('ndj-5', 5, { srd: { housingSpends: -1 } }),
    line('ndj-6', 6),
  ]);
  const res = await upload(app, body);
  t.equal(res.statusCode, 202, res.body);
  const answer = res.json();
  t.match(answer.id, /^cmp_[0-9a-f]{32}$/);
  t.equal(answer.accepted, 2);
  t.equal(answer.rejectedTotal, 4);
  t.same(
    answer.rejected.map((r: { line: number }) => r.line),
    [2, 4, 5, 6],
    'line numbers as an editor shows them (the blank line 3 counts)',
  );
  t.same(answer.rejected[0].issues, [{ path: '', message: 'not valid JSON' }]);
  t.match(answer.rejected[1].issues, [{ path: 'cpf' }]);
  t.same(answer.rejected[2].issues, [{ path: 'extra', message: 'unknown field' }]);
  t.match(answer.rejected[3].issues, [{ path: 'srd.grossIncome' }, { path: 'srd.housingSpends' }]);

  const rows = await requestsOf(database.db, answer.id);
  t.same(rows.map((r) => [r.customer_uuid, r.status]), [['ndj-1', 'queued'], ['ndj-6', 'queued']]);
  t.equal(rows[0]!.cpf_masked, `***.${cpfOf(1).slice(3, 6)}.${cpfOf(1).slice(6, 9)}-**`);
  t.ok(rows[0]!.queued_body && rows[0]!.queued_body.length > 0, 'the body to forward is kept, sealed');
  t.equal(rows[0]!.x_request_id, `${answer.id}:1`, 'each line carries its campaign and line as X-Request-Id');

  const stored = (await get(app, `/v1/campaigns/${answer.id}`)).json();
  t.equal(stored.counts.queued, 2);
  t.equal(stored.rejectedTotal, 4);
  t.same(stored.rejected, answer.rejected, 'the rejected lines are kept with the campaign');
});

t.test('a customer in flight, or twice in the file, is rejected by line number and never queued twice', async (t) => {
  const first = await upload(app, ndjson([line('dup-1', 11), line('dup-2', 12)]));
  t.equal(first.statusCode, 202);
  const single = await app.inject({
    method: 'POST',
    url: '/v1/underwritings',
    headers: { 'content-type': 'application/json' },
    payload: line('dup-2', 12),
  });
  t.equal(single.statusCode, 409, 'a single submit of a queued customer is in flight too');

  const lines = [line('dup-1', 11), line('dup-3', 13), line('dup-3', 13), line('dup-4', 14)];
  // Past one batch as well: a duplicate in a later batch meets the first in the database.
  for (let i = 0; i < 1005; i++) lines.push(line(`dup-fill-${i}`, 1000 + i));
  lines.push(line('dup-4', 14));
  const res = await upload(app, ndjson(lines));
  t.equal(res.statusCode, 202);
  const answer = res.json();
  t.equal(answer.accepted, 2 + 1005);
  t.same(answer.rejected.map((r: { line: number }) => r.line), [1, 3, lines.length]);
  for (const r of answer.rejected) t.match(r.issues, [{ path: 'customerUuid', message: /in flight|awaiting its callback/ }]);
  const { rows } = await sql<{ n: number }>`select count(*)::int as n from underwriting_requests where customer_uuid in ('dup-1', 'dup-3', 'dup-4')`.execute(database.db);
  t.equal(Number(rows[0]!.n), 3, 'one request each');
});

t.test('a CSV file: header of field names (srd.* dotted), RFC 4180 quoting, typed cells, lines by number', async (t) => {
  const header = 'customerUuid,cpf,costSavingEnabled,srd.grossIncome,srd.address.street,srd.address.city,srd.occupation';
  const body = [
    header,
    `csv-1,${cpfOf(21)},true,8500.5,"Rua ""A"", 42",São Paulo,Retired`,
    `csv-2,01234567890,FALSE,1000,"Rua B`,
    `bloco 2",Rio,`,
    `csv-3,${cpfOf(23)},maybe,abc,,,`,
    `csv-4,${cpfOf(24)},false`,
    `"csv-5"x,${cpfOf(25)},false,1,,,`,
    `csv-6,${cpfOf(26)},false,,,Rio,`,
    '',
  ].join('\r\n');
  const res = await upload(app, body, 'text/csv; charset=utf-8');
  t.equal(res.statusCode, 202, res.body);
  const answer = res.json();
  t.equal(answer.accepted, 2);
  t.same(answer.rejected.map((r: { line: number }) => r.line), [5, 6, 7, 8], 'a quoted line break spans lines 3-4; numbers stay physical');
  t.match(answer.rejected[0].issues, [{ path: 'costSavingEnabled' }, { path: 'srd.grossIncome' }]);
  t.match(answer.rejected[1].issues, [{ message: 'the line has 3 fields, the header 7' }]);
  t.match(answer.rejected[2].issues, [{ message: /quoted field must be followed/ }]);
  t.match(answer.rejected[3].issues, [{ path: 'srd.grossIncome' }], 'srd without its required grossIncome');

  const rows = await requestsOf(database.db, answer.id);
  t.same(rows.map((r) => r.customer_uuid), ['csv-1', 'csv-2']);
  t.same(rows[0]!.srd, { grossIncome: 8500.5, address: { street: 'Rua "A", 42', city: 'São Paulo' }, occupation: 'Retired' });
  t.same(rows[1]!.srd, { grossIncome: 1000, address: { street: 'Rua B\r\nbloco 2', city: 'Rio' } });
  t.equal(rows[1]!.cpf_hash, hashCpf('01234567890', TEST_CPF_HASH_KEY), 'a CPF keeps its leading zero (read as text, never as a number)');
  t.equal((await get(app, `/v1/campaigns/${answer.id}`)).json().source, 'csv');
});

t.test('a CSV header that does not name the submit\'s fields is refused whole (400), nothing stored', async (t) => {
  const before = await database.db.selectFrom('campaigns').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
  const unknown = await upload(app, `customerUuid,cpf,costSavingEnabled,${cpfOf(31)}\r\nx,${cpfOf(31)},true,1\r\n`, CSV);
  t.equal(unknown.statusCode, 400);
  t.equal(unknown.json().error, 'validation_failed');
  t.match(unknown.json().issues, [{ path: 'header.4', message: /unknown column/ }]);
  t.notMatch(unknown.body, cpfOf(31), 'a column named like a CPF is not echoed');
  const missing = await upload(app, 'customerUuid,cpf\r\n', CSV);
  t.equal(missing.statusCode, 400);
  t.match(missing.json().issues, [{ message: 'column costSavingEnabled is missing' }]);
  const empty = await upload(app, '', CSV);
  t.equal(empty.statusCode, 400);
  const after = await database.db.selectFrom('campaigns').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
  t.equal(Number(after.n), Number(before.n), 'no campaign');
});

t.test('only NDJSON and CSV in UTF-8 are read (415)', async (t) => {
  for (const type of ['application/json', 'text/csv; charset=latin1', 'text/tab-separated-values', 'text/plain', 'multipart/form-data']) {
    const res = await upload(app, '{}', type);
    t.equal(res.statusCode, 415, type);
    t.equal(res.json().error, 'unsupported_media_type');
    // Types no route reads are refused before the route; the answer still names the campaign's.
    t.match(res.json().message, /application\/x-ndjson or text\/csv, in UTF-8/, `${type}: what to send instead`);
    t.notMatch(res.json().message, /application\/json$/);
  }
});

t.test('an NDJSON file labelled application/json is refused 415 like any other type, whatever its size', async (t) => {
  // The app's JSON parser read it first: 400 'not valid JSON' (two lines are no one JSON text), or 413
  // 'too large' past its 64 KiB, where a campaign may hold 1 GiB (found by the hostile field test).
  const two = ndjson([line('json-1', 76), line('json-2', 77)]);
  const big = ndjson(Array.from({ length: 1000 }, (_, i) => line(`json-big-${i}`, 78)));
  t.ok(big.length > 64 * 1024);
  for (const payload of [two, big]) {
    const res = await upload(app, payload, 'application/json');
    t.equal(res.statusCode, 415, res.body);
    t.equal(res.json().error, 'unsupported_media_type');
    t.match(res.json().message, /application\/x-ndjson or text\/csv/);
  }
  const stored = await database.db.selectFrom('underwriting_requests').select('id').where('customer_uuid', 'like', 'json-%').execute();
  t.same(stored, [], 'nothing queued');
});

t.test('a compressed file (Content-Encoding) is refused 415 whole, not read as text line by line', async (t) => {
  const res = await upload(app, ndjson([line('gz-1', 75)]), NDJSON, { 'content-encoding': 'gzip' });
  t.equal(res.statusCode, 415, res.body);
  t.match(res.json(), { error: 'unsupported_media_type', message: /content-encoding gzip is not read/ });
  t.equal((await upload(app, ndjson([line('gz-2', 76)]), NDJSON, { 'content-encoding': 'identity' })).statusCode, 202);
});

t.test('a file in a transfer coding besides chunked (Transfer-Encoding: gzip, chunked) is refused 415 whole, not read as text', async (t) => {
  // Node passes such a body on as it came: every line of the gzip 'not UTF-8', a campaign of
  // nothing answered 202 (found by the campaigns' hostile field test).
  const base = await listen(app);
  const { port } = new URL(base);
  const gzipped = gzipSync(ndjson([line('te-1', 79)]));
  const answer = await new Promise<string>((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port: Number(port) }, () => {
      socket.write('POST /v1/campaigns HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n');
      socket.end(Buffer.concat([Buffer.from(`${gzipped.length.toString(16)}\r\n`), gzipped, Buffer.from('\r\n0\r\n\r\n')]));
    });
    let text = '';
    socket.on('data', (d) => (text += d));
    socket.on('error', reject);
    socket.on('close', () => resolve(text));
  });
  t.match(answer, /^HTTP\/1\.1 415 /);
  t.match(answer, /"error":"unsupported_media_type"/);
  t.match(answer, /transfer-encoding gzip is not read/);
  const stored = await database.db.selectFrom('underwriting_requests').select('id').where('customer_uuid', '=', 'te-1').execute();
  t.same(stored, [], 'nothing queued');
});

t.test('an NDJSON file may begin with a byte order mark, also split across the first chunks', async (t) => {
  const res = await upload(app, `\ufeff${ndjson([line('bom-1', 71), line('bom-2', 72)])}`);
  t.equal(res.statusCode, 202, res.body);
  t.same([res.json().accepted, res.json().rejected], [2, []], 'the first line is read as JSON');
  const uploader = uploaderWith();
  const text = Buffer.from(ndjson([line('bom-3', 73)]));
  const answer = await uploader({
    source: 'ndjson',
    body: [Buffer.from([0xef]), Buffer.from([0xbb, 0xbf]), text],
    createdBy: 'peer:test',
    traceparent: null,
    log: gw.app.log,
  });
  t.same([answer.accepted, answer.rejected], [1, []]);
});

t.test('a CSV file may begin with a byte order mark before a quoted header (as Excel and Export-Csv write it)', async (t) => {
  const body = `\ufeff"customerUuid","cpf","costSavingEnabled"\r\n"bom-csv-1","${cpfOf(77)}","false"\r\n`;
  const res = await upload(app, body, CSV);
  t.equal(res.statusCode, 202, res.body);
  t.same([res.json().accepted, res.json().rejected], [1, []], 'the header names the fields; line 2 is queued');
});

t.test('a line in another encoding than UTF-8 (Windows-1252) is rejected by its number, never queued with its letters replaced', async (t) => {
  const latin1 = (text: string) => Buffer.from(text, 'latin1');
  const inject = (payload: Buffer, type: string) => app.inject({ method: 'POST', url: '/v1/campaigns', headers: { 'content-type': type }, payload });
  const nd = await inject(latin1(ndjson([line('enc-1', 131, { srd: { grossIncome: 1 } }), line('enc-2', 132, { srd: { grossIncome: 1, address: { city: 'São Paulo' } } })])), NDJSON);
  t.equal(nd.statusCode, 202, nd.body);
  t.same(nd.json().accepted, 1);
  t.match(nd.json().rejected, [{ line: 2, issues: [{ path: '', message: /a byte that is no UTF-8, or U\+FFFD/ }] }]);
  const csv = await inject(latin1(`customerUuid,cpf,costSavingEnabled,srd.grossIncome,srd.address.city\r\nenc-3,${cpfOf(133)},false,1,Rio\r\nenc-4,${cpfOf(134)},false,1,"Bras\u00edlia"\r\n`), CSV);
  t.equal(csv.statusCode, 202, csv.body);
  t.same(csv.json().accepted, 1);
  t.match(csv.json().rejected, [{ line: 3, issues: [{ message: /a byte that is no UTF-8, or U\+FFFD/ }] }]);
  const { rows } = await sql<{ n: number }>`select count(*)::int as n from underwriting_requests where customer_uuid in ('enc-2', 'enc-4')`.execute(database.db);
  t.equal(Number(rows[0]!.n), 0, 'nothing of those lines is stored');
});

t.test('the rejected lines kept are the first 1000 by number, a customer in flight found late among them', async (t) => {
  const queued = await upload(app, ndjson([line('late-1', 141)]));
  t.equal(queued.statusCode, 202);
  // Line 1's customer is in flight: known once its batch is written, after 1001 invalid lines were read.
  const lines: unknown[] = [line('late-1', 141)];
  for (let i = 0; i < 1001; i++) lines.push('not json');
  lines.push(line('late-2', 142));
  const answer = await uploaderWith({ batchLines: 2 })({ source: 'ndjson', body: [ndjson(lines)], createdBy: 'peer:test', traceparent: null, log: gw.app.log });
  t.equal(answer.rejectedTotal, 1002);
  t.equal(answer.rejected.length, 1000);
  t.same(answer.rejected.slice(0, 2).map((r) => r.line), [1, 2], 'line 1 (in flight) is the first of them');
  t.equal(answer.rejected.at(-1)!.line, 1000);
});

t.test('a customer twice in a file is queued once, even when its first line was answered before the second was read', async (t) => {
  const { db } = database;
  async function* body() {
    yield ndjson([line('once-1', 121), line('once-2', 122)]);
    // The first batch is written while the file is read on, and its request ends (the provider
    // refused it) before the later batch that names the customer again is read.
    await until(async () => (await sql`select 1 from underwriting_requests where customer_uuid = 'once-1'`.execute(db)).rows.length > 0);
    await sql`update underwriting_requests set status = 'submit_failed', queued_body = null, upstream_status = 400 where customer_uuid = 'once-1'`.execute(db);
    yield ndjson([line('once-3', 123), line('once-1', 121)]);
  }
  const answer = await uploaderWith({ batchLines: 2 })({ source: 'ndjson', body: body(), createdBy: 'peer:test', traceparent: null, log: gw.app.log });
  t.equal(answer.accepted, 3);
  t.same(answer.rejected.map((r) => r.line), [4], 'the second line of once-1, by its number');
  t.match(answer.rejected[0]!.issues, [{ path: 'customerUuid', message: /earlier line of this file/ }]);
  const { rows } = await sql<{ n: number }>`select count(*)::int as n from underwriting_requests where customer_uuid = 'once-1'`.execute(db);
  t.equal(Number(rows[0]!.n), 1, 'one request: never sent twice');
});

t.test('the line limit counts lines as numbered, blank ones too; a CSV\'s header is not one', async (t) => {
  const uploader = uploaderWith({ maxLines: 5 });
  const log = gw.app.log;
  await t.rejects(uploader({ source: 'ndjson', body: [`\n\n\n\n\n${ndjson([line('blank-6', 81)])}`], createdBy: 'peer:test', traceparent: null, log }), {
    statusCode: 413,
    message: /more than 5 lines \(line 6\)/,
  });
  const five = await uploader({ source: 'ndjson', body: [`\n\n\n\n${ndjson([line('blank-5', 82)])}`], createdBy: 'peer:test', traceparent: null, log });
  t.equal(five.accepted, 1, 'line 5 is within the limit');
  const csv = ['customerUuid,cpf,costSavingEnabled', ...[1, 2, 3, 4, 5].map((n) => `csv-limit-${n},${cpfOf(90 + n)},false`)].join('\r\n');
  const header = await uploader({ source: 'csv', body: [`${csv}\r\n`], createdBy: 'peer:test', traceparent: null, log });
  t.equal(header.accepted, 5, 'five lines after the header');
});

t.test('a CSV header of many unknown columns is answered with at most 10 issues, the missing columns first', async (t) => {
  const columns = Array.from({ length: 1500 }, (_, i) => `extra${i}`).join(',');
  const res = await upload(app, `${columns}\r\n`, CSV);
  t.equal(res.statusCode, 400);
  const issues = res.json().issues as { path: string; message: string }[];
  t.equal(issues.length, 10);
  t.same(issues.slice(0, 3).map((i) => i.message), ['column customerUuid is missing', 'column cpf is missing', 'column costSavingEnabled is missing']);
  t.match(issues[3], { path: 'header.1', message: /unknown column "extra0"/ });
  t.ok(res.body.length < 10_000, `a short answer (${res.body.length} bytes)`);
});

t.test('a file of no bytes (Content-Length: 0) is read as the empty file it is, not refused for its type', async (t) => {
  const res = await app.inject({ method: 'POST', url: '/v1/campaigns', headers: { 'content-type': NDJSON, 'content-length': '0' }, payload: '' });
  t.equal(res.statusCode, 202, res.body);
  t.equal(res.json().accepted, 0);
});

t.test('an empty NDJSON file is a campaign of nothing, done at once', async (t) => {
  const res = await upload(app, '\n\n');
  t.equal(res.statusCode, 202);
  t.same({ ...res.json(), id: undefined }, { id: undefined, accepted: 0, rejected: [], rejectedTotal: 0 });
  const view = (await get(app, `/v1/campaigns/${res.json().id}`)).json();
  t.equal(view.status, 'done');
});

t.test('past the line limit the upload is refused (413) and what it queued is cancelled', async (t) => {
  const upload = uploaderWith({ maxLines: 5, batchLines: 2 });
  const lines = Array.from({ length: 7 }, (_, i) => line(`limit-${i}`, 50 + i));
  await t.rejects(upload({ source: 'ndjson', body: [ndjson(lines)], createdBy: 'peer:test', traceparent: null, log: gw.app.log }), {
    statusCode: 413,
    code: 'payload_too_large',
  });
  const campaign = await database.db.selectFrom('campaigns').selectAll().orderBy('id', 'desc').executeTakeFirstOrThrow();
  t.equal(campaign.status, 'cancelled');
  t.match(campaign.upload_error, /more than 5 lines/);
  const rows = await requestsOf(database.db, campaign.public_id);
  t.ok(rows.length >= 2, 'batches had been queued as the file was read');
  t.same(new Set(rows.map((r) => r.status)), new Set(['cancelled']), 'and are cancelled');
  t.ok(rows.every((r) => r.queued_body === null), 'their sealed bodies gone');
});

t.test('a line over the line limit is rejected by number; the lines after it are read', async (t) => {
  const long = JSON.stringify(line('long-1', 61)).replace('{', `{${' '.repeat(17_000)}`);
  const res = await upload(app, ndjson([long, line('long-2', 62)]));
  t.equal(res.statusCode, 202);
  t.same(res.json().rejected, [{ line: 1, issues: [{ path: '', message: 'the line is longer than 16384 characters' }] }]);
  t.equal(res.json().accepted, 1);
});

t.test('the submit allowlist and QUERY_API_KEYS guard the campaigns routes', async (t) => {
  const KEY = 'campaign-key-0123456789abcdef';
  const guarded = await buildTestApp(t, { env: { QUERY_API_KEYS: KEY }, database });
  const base = await listen(guarded.app);
  const none = await upload(guarded.app, ndjson([line('auth-1', 71)]));
  t.equal(none.statusCode, 401);
  const wrong = await upload(guarded.app, ndjson([line('auth-1', 71)]), NDJSON, { authorization: 'Bearer nope' });
  t.equal(wrong.statusCode, 401);
  const ok = await upload(guarded.app, ndjson([line('auth-1', 71)]), NDJSON, { authorization: `Bearer ${KEY}` });
  t.equal(ok.statusCode, 202);
  const view = (await get(guarded.app, `/v1/campaigns/${ok.json().id}`, { authorization: `Bearer ${KEY}` })).json();
  t.match(view.createdBy, /^key:[0-9a-f]{12}$/, 'the key by its fingerprint');
  t.notMatch(JSON.stringify(view), KEY);
  t.equal((await get(guarded.app, '/v1/campaigns')).statusCode, 401);

  const outside = await httpRequest(`${base}/v1/campaigns`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}`, 'content-type': NDJSON },
    body: ndjson([line('auth-2', 72)]),
    localAddress: '127.0.0.2',
  });
  t.equal(outside.status, 403, 'outside SUBMIT_ALLOWED_IPS');
  t.equal((await requestsOf(database.db, ok.json().id)).length, 1);
});

t.test('no full CPF in any answer, log line or stored row', async (t) => {
  const cpfs = [cpfOf(81), cpfOf(82), cpfOf(83)];
  const res = await upload(
    app,
    ndjson([line('leak-1', 81), line('leak-2', 82, { srd: { grossIncome: 1, address: { street: `CPF ${cpfs[1]}` } } }), `{"customerUuid":"leak-3","cpf":"${cpfs[2]}","costSavingEnabled":"x"}`, `{"cpf":"${cpfs[2]}"`]),
  );
  t.equal(res.statusCode, 202);
  const view = await get(app, `/v1/campaigns/${res.json().id}`);
  const results = await get(app, `/v1/campaigns/${res.json().id}/results`);
  const dump = await dumpDatabase(database);
  for (const cpf of cpfs) {
    for (const [what, text] of [
      ['answer', res.body],
      ['view', view.body],
      ['results', results.body],
      ['logs', gw.logs.text()],
    ] as const) {
      t.notMatch(text, cpf, `${what} holds no full CPF`);
    }
    for (const form of dumpForms(cpf)) t.notOk(dump.includes(form), 'the database holds no full CPF in clear');
  }
});

// Two uploads naming the same customers in opposite orders, their batches written at the same time
// (two instances, or two clients of one): inserted in file order, each batch waited on the other's
// in-flight index entries and PostgreSQL ended one with a deadlock (40P01): a 503 and a cancelled
// campaign for an upload whose lines were all valid. PostgreSQL only: PGlite has one connection.
if (SERVER_URL) t.test('two uploads naming the same customers in opposite orders at once: no deadlock, each customer queued once, the rest reported in flight', async (t) => {
  const uploader = uploaderWith();
  const customers = Array.from({ length: 400 }, (_, i) => `race-${i}`);
  const body = (order: string[]) => [ndjson(order.map((c) => line(c, 1000 + Number(c.slice(5)))))];
  // A third transaction holds one customer of the middle uncommitted, so that both batches are under
  // way (each blocked on it) before either can finish; then it rolls back. The uploads start once
  // its row is in: started together, a holder whose statement came late (a CI run, the machine busy)
  // found both uploads committed, and no batch ever waited.
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let held!: () => void;
  const holding = new Promise<void>((resolve) => (held = resolve));
  const holder = database.db.transaction().execute(async (trx) => {
    const sealer = sealerOf([TEST_CPF_HASH_KEY]);
    const [row] = await enqueueSubmits(trx, [{ body: line('race-200', 1200) as never, xRequestId: 'holder', traceparent: null }], { now: new Date(), cpfHashKey: TEST_CPF_HASH_KEY, sealer });
    if (!row) throw new Error('the holder found race-200 in flight');
    held();
    await released;
    throw new Error('rolled back');
  });
  await Promise.race([holding, holder]);
  const log = gw.app.log;
  const outcomes = Promise.allSettled([
    uploader({ source: 'ndjson', body: body(customers), createdBy: 'peer:a', traceparent: null, log }),
    uploader({ source: 'ndjson', body: body([...customers].reverse()), createdBy: 'peer:b', traceparent: null, log }),
  ]);
  const waiting = sql<{ n: number }>`select count(*)::int as n from pg_stat_activity
    where datname = current_database() and wait_event_type = 'Lock' and wait_event = 'transactionid'
      and query like '%insert into underwriting_requests%'`;
  await until(async () => (await waiting.execute(database.db)).rows[0]!.n >= 2, 30_000, 'both batches waiting on a lock');
  release();
  await t.rejects(holder, /rolled back/);
  const [a, b] = await outcomes;
  t.equal(a.status, 'fulfilled', a.status === 'rejected' ? String((a.reason as Error).message) : 'first upload answered');
  t.equal(b.status, 'fulfilled', b.status === 'rejected' ? String((b.reason as Error).message) : 'second upload answered');
  if (a.status !== 'fulfilled' || b.status !== 'fulfilled') return;
  t.equal(a.value.accepted + b.value.accepted, 400, 'each customer queued once, by one of them');
  t.equal(a.value.rejectedTotal + b.value.rejectedTotal, 400, 'and reported in flight by the other');
  t.ok([...a.value.rejected, ...b.value.rejected].every((r) => r.issues[0]!.message.includes('already has a request queued')));
  const { rows } = await sql<{ customers: number; requests: number }>`select count(distinct customer_uuid)::int as customers, count(*)::int as requests
    from underwriting_requests where customer_uuid like 'race-%' and status = 'queued'`.execute(database.db);
  t.same(rows[0], { customers: 400, requests: 400 });
  for (const answer of [a.value, b.value]) {
    const ids = (await requestsOf(database.db, answer.id)).map((r) => Number(r.x_request_id!.split(':')[1]));
    t.same(ids, [...ids].sort((x, y) => x - y), 'request ids follow the file order (the results\' order)');
  }
});
