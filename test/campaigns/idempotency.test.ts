import { sql } from 'kysely';
import t from 'tap';
import { campaignUploader } from '../../src/campaigns/upload.js';
import { keyDigester } from '../../src/requests/key-digest.js';
import { sealerOf } from '../../src/submissions/seal.js';
import { submitBodySchema } from '../../src/submissions/schemas.js';
import { buildTestApp, TEST_CPF_HASH_KEY } from '../helpers/app.js';
import { freshDatabase } from '../helpers/database.js';
import { keyAsStored } from '../submissions/fixtures.js';
import { CSV, get, holdTheProvider, line, ndjson, requestsOf, upload } from './fixtures.js';

// POST /v1/campaigns with an Idempotency-Key (docs/campaigns.md): the same key and file get the
// same campaign again, nothing queued twice; another file 422; a key still being read 409; a key
// whose upload failed, died or expired is free again. As a submit's key (test/submissions/idempotency.test.ts).

const database = await freshDatabase(t);
const gw = await buildTestApp(t, { database });
await holdTheProvider(database.db);
const { app } = gw;
const db = database.db;

const campaignsOfKey = async (key: string) =>
  (await sql<{ public_id: string; status: string }>`select public_id, status from campaigns where idempotency_key = ${keyAsStored(key)} order by id`.execute(db)).rows;
const campaignCount = async () => Number((await sql<{ n: number }>`select count(*)::int as n from campaigns`.execute(db)).rows[0]!.n);

t.test('the same key and the same file: the same campaign answered again (202, Idempotent-Replayed), nothing queued twice', async (t) => {
  const file = ndjson([line('idem-1', 1), line('idem-2', 2), { customerUuid: 'idem-3' }]);
  const first = await upload(app, file, undefined, { 'idempotency-key': 'key-same' });
  t.equal(first.statusCode, 202, first.body);
  t.equal(first.headers['idempotent-replayed'], undefined, 'the first answer is no replay');
  const before = await campaignCount();
  const again = await upload(app, file, undefined, { 'idempotency-key': 'key-same' });
  t.equal(again.statusCode, 202, again.body);
  t.equal(again.headers['idempotent-replayed'], 'true');
  t.same(again.json(), first.json(), 'the first answer again: same id, counts and rejected lines');
  t.equal(await campaignCount(), before, 'no second campaign');
  t.same((await requestsOf(db, first.json().id)).map((r) => r.customer_uuid), ['idem-1', 'idem-2'], 'each line queued once');
});

t.test('the same key with another file (or the same bytes as another media type): 422, nothing stored', async (t) => {
  const first = await upload(app, ndjson([line('reuse-1', 11)]), undefined, { 'idempotency-key': 'key-reuse' });
  t.equal(first.statusCode, 202, first.body);
  const before = await campaignCount();
  const other = await upload(app, ndjson([line('reuse-1', 11), line('reuse-2', 12)]), undefined, { 'idempotency-key': 'key-reuse' });
  t.equal(other.statusCode, 422, other.body);
  t.equal(other.json().error, 'idempotency_key_reused');
  const asCsv = await upload(app, ndjson([line('reuse-1', 11)]), CSV, { 'idempotency-key': 'key-reuse' });
  t.equal(asCsv.statusCode, 422, asCsv.body);
  t.equal(await campaignCount(), before, 'no campaign stored');
  t.same((await requestsOf(db, first.json().id)).map((r) => r.customer_uuid), ['reuse-1']);
  const unknown = (await sql<{ n: number }>`select count(*)::int as n from underwriting_requests where customer_uuid = 'reuse-2'`.execute(db)).rows[0]!.n;
  t.equal(Number(unknown), 0, 'the second file queued nothing');
});

t.test('while the first upload with a key is still read: 409 in_flight; once it is silent past 5 minutes, a retry takes it over', async (t) => {
  // A campaign as an upload holding the key leaves it while it reads (uploaded_at null, its heartbeat fresh).
  const now = new Date();
  await sql`insert into campaigns (public_id, source, created_by, created_at, updated_at, idempotency_key)
    values ('cmp_00000000000000000000000000000001', 'ndjson', 'peer:test', ${now}, ${now}, ${keyAsStored('key-busy')})`.execute(db);
  const file = ndjson([line('busy-1', 21)]);
  const busy = await upload(app, file, undefined, { 'idempotency-key': 'key-busy' });
  t.equal(busy.statusCode, 409, busy.body);
  t.equal(busy.json().error, 'in_flight');

  await sql`update campaigns set updated_at = ${new Date(now.getTime() - 6 * 60_000)} where public_id = 'cmp_00000000000000000000000000000001'`.execute(db);
  const retry = await upload(app, file, undefined, { 'idempotency-key': 'key-busy' });
  t.equal(retry.statusCode, 202, retry.body);
  t.not(retry.json().id, 'cmp_00000000000000000000000000000001', 'a new campaign');
  const dead = (await get(app, '/v1/campaigns/cmp_00000000000000000000000000000001')).json();
  t.equal(dead.status, 'cancelled', 'the dead upload is cancelled');
  t.match(dead.uploadError, /Idempotency-Key/);
  t.same(await campaignsOfKey('key-busy'), [{ public_id: retry.json().id, status: 'running' }], 'the key names the new campaign');
});

t.test('an upload that failed frees its key: a retry with it uploads the file anew', async (t) => {
  const before = await campaignCount();
  const bad = await upload(app, 'customerUuid,nope\nx,1\n', CSV, { 'idempotency-key': 'key-failed' });
  t.equal(bad.statusCode, 400, bad.body);
  t.same(await campaignsOfKey('key-failed'), [], 'the key is free');
  t.equal(await campaignCount(), before, 'a refused file stores nothing, with a key as without (no cancelled campaign left behind)');
  const list = (await get(app, '/v1/campaigns')).json();
  t.notOk(list.items.some((c: { uploadError?: string | null }) => /header/.test(c.uploadError ?? '')), 'none listed');
  const good = await upload(app, 'customerUuid,cpf,costSavingEnabled,srd.grossIncome\nfailed-1,' + line('x', 31).cpf + ',false,1000\n', CSV, {
    'idempotency-key': 'key-failed',
  });
  t.equal(good.statusCode, 202, good.body);
  t.equal(good.json().accepted, 1);
});

t.test('a keyed upload cancelled before its first batch: the cancel stands (the campaign kept, cancelled), the upload answers 409', async (t) => {
  // Its key's claim makes the row before any line is read, so it can be listed and cancelled then;
  // the upload, failing with nothing queued, removed the row as a refused file's: the cancel answered
  // 202, then the campaign was 404 (found by the campaigns' hostile field test).
  const uploader = campaignUploader({
    db,
    clock: () => new Date(),
    schema: submitBodySchema(false),
    cpfHashKey: TEST_CPF_HASH_KEY,
    keyDigests: keyDigester([TEST_CPF_HASH_KEY]),
    sealer: sealerOf([TEST_CPF_HASH_KEY]),
  });
  let cancelled: { statusCode: number; id: string } | undefined;
  async function* file() {
    yield ndjson([line('cancel-early-1', 41)]);
    const [claimed] = await campaignsOfKey('key-cancel-early');
    const res = await app.inject({ method: 'POST', url: `/v1/campaigns/${claimed!.public_id}/cancel` });
    cancelled = { statusCode: res.statusCode, id: claimed!.public_id };
    yield ndjson([line('cancel-early-2', 42)]);
  }
  const failed = await uploader({ source: 'ndjson', body: file(), createdBy: 'peer:127.0.0.1', traceparent: null, log: app.log, idempotencyKey: 'key-cancel-early' }).then(
    () => undefined,
    (err: { statusCode?: number; code?: string }) => err,
  );
  t.equal(cancelled?.statusCode, 202);
  t.match(failed, { statusCode: 409, code: 'campaign_cancelled' });
  const view = await get(app, `/v1/campaigns/${cancelled!.id}`);
  t.equal(view.statusCode, 200, 'the cancelled campaign is still there');
  t.equal(view.json().status, 'cancelled');
  t.ok(view.json().cancelledAt);
  t.same(await requestsOf(db, cancelled!.id), [], 'nothing queued');
  const again = await upload(app, ndjson([line('cancel-early-1', 41)]), undefined, { 'idempotency-key': 'key-cancel-early' });
  t.equal(again.statusCode, 202, 'its key is free again');
  t.not(again.json().id, cancelled!.id);
});

t.test('a key older than 24 h is free again', async (t) => {
  const first = await upload(app, ndjson([line('old-1', 41)]), undefined, { 'idempotency-key': 'key-old' });
  t.equal(first.statusCode, 202, first.body);
  await sql`update campaigns set created_at = created_at - interval '25 hours' where public_id = ${first.json().id}`.execute(db);
  const later = await upload(app, ndjson([line('old-2', 42)]), undefined, { 'idempotency-key': 'key-old' });
  t.equal(later.statusCode, 202, later.body);
  t.not(later.json().id, first.json().id);
});

t.test('two uploads with one key at once: one campaign, each line queued once', async (t) => {
  const file = ndjson(Array.from({ length: 50 }, (_, i) => line(`race-${i}`, 100 + i)));
  const answers = await Promise.all([0, 1, 2].map(() => upload(app, file, undefined, { 'idempotency-key': 'key-race' })));
  const statuses = answers.map((a) => a.statusCode);
  t.ok(statuses.every((s) => s === 202 || s === 409), `202 or 409 in_flight each: ${statuses.join(',')}`);
  const ids = new Set(answers.filter((a) => a.statusCode === 202).map((a) => a.json().id));
  t.equal(ids.size, 1, 'every 202 names the same campaign');
  t.equal((await campaignsOfKey('key-race')).length, 1);
  const n = (await sql<{ n: number }>`select count(*)::int as n from underwriting_requests where customer_uuid like 'race-%'`.execute(db)).rows[0]!.n;
  t.equal(Number(n), 50, 'each customer queued once');
});

t.test('an Idempotency-Key that is not 1-200 printable ASCII characters: 400, nothing stored', async (t) => {
  const before = await campaignCount();
  const res = await upload(app, ndjson([line('badkey-1', 51)]), undefined, { 'idempotency-key': 'x'.repeat(201) });
  t.equal(res.statusCode, 400, res.body);
  t.equal(res.json().error, 'validation_failed');
  t.equal(await campaignCount(), before);
});
