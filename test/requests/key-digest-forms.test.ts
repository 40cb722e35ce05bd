import { sql } from 'kysely';
import t from 'tap';
import { keyDigester } from '../../src/requests/key-digest.js';
import { bodyHash, claimKey, requestOfKey } from '../../src/requests/idempotency.js';
import { digestStoredKeys, KEY_DIGEST_PASS } from '../../src/requests/key-digest-pass.js';
import { claimCampaignKey } from '../../src/campaigns/sql.js';
import { TEST_CPF_HASH_KEY } from '../helpers/app.js';
import { freshDatabase } from '../helpers/database.js';
import { until } from '../helpers/until.js';
import { holdTheProvider, line, ndjson, upload } from '../campaigns/fixtures.js';
import { dumpDatabase } from '../personal-data/fixtures.js';
import { CPF, storedKeys, storedRequests, submitGateway, validRequest } from '../submissions/fixtures.js';

// A key may be stored in more than one form at once (as sent by a version before digests, its
// digest under an earlier CPF_HASH_KEY, its digest now): whatever form a retry meets, it must
// find what the earlier attempt left, and never store the key as sent itself.

type Database = Awaited<ReturnType<typeof freshDatabase>>;
const NEWER = 'a-newer-cpf-hash-key-0123456789abcdef';
const earlier = keyDigester([TEST_CPF_HASH_KEY]);

const passFinished = (database: Database) =>
  until(async () => (await database.db.selectFrom('maintenance_passes').select('finished_at').where('name', '=', KEY_DIGEST_PASS).executeTakeFirst())?.finished_at ?? undefined, 20_000, 'the pass at start');

/** A request an attempt stored `submitting` and then answered 503 for, freeing its key (nothing was sent). */
async function unsentRequest(database: Database, customerUuid: string, storedKey: string): Promise<void> {
  const now = new Date();
  await sql`insert into underwriting_requests (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, status, idempotency_key, submitted_at, updated_at)
    values (${customerUuid}, 'h', '***.982.247-**', true, 'submitting', ${storedKey}, ${now}, ${now})`.execute(database.db);
}

for (const [form, stored] of [
  ['its digest under an earlier CPF_HASH_KEY', (key: string) => earlier.digest(key)],
  ['the key as sent (a version before digests)', (key: string) => key],
] as const) {
  t.test(`a retry after a 503 whose row was committed under ${form} goes on`, async (t) => {
    const database = await freshDatabase(t);
    const gw = await submitGateway(t, { database, env: { CPF_HASH_KEY: `${NEWER},${TEST_CPF_HASH_KEY}` } });
    await gw.app.ready();
    await passFinished(database);
    const key = `retry-503-${CPF}`;
    const body = validRequest({ customerUuid: 'retry-503-1' });
    await unsentRequest(database, body.customerUuid, stored(key));
    const retry = await gw.submit(body, { 'idempotency-key': key });
    t.equal(retry.statusCode, 202, retry.body);
    t.equal(gw.provider.received.length, 1, 'sent once');
  });
}

t.test('a takeover after the lease answers from the request even when the key row and the request are in different forms', async (t) => {
  const database = await freshDatabase(t);
  const gw = await submitGateway(t, { database });
  await gw.app.ready();
  await passFinished(database);
  const key = `takeover-${CPF}`;
  const body = validRequest({ customerUuid: 'takeover-1' });
  const long = new Date(Date.now() - 60_000);
  // An attempt of a version before digests stored its request (the provider accepted it) and died
  // before recording its answer; a pass since rewrote the key's row, not yet the request.
  await sql`insert into underwriting_requests (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, status, upstream_status, idempotency_key, submitted_at, updated_at)
    values (${body.customerUuid}, 'h', '***.982.247-**', true, 'completed', 202, ${key}, ${long}, ${long})`.execute(database.db);
  await sql`insert into idempotency_keys (key, body_hash, created_at, expires_at)
    values (${earlier.digest(key)}, ${bodyHash(body)}, ${long}, ${new Date(Date.now() + 3600_000)})`.execute(database.db);
  const retry = await gw.submit(body, { 'idempotency-key': key });
  t.equal(retry.headers['idempotent-replayed'], 'true', retry.body);
  t.equal(retry.statusCode, 202);
  t.equal(gw.provider.received.length, 0, 'the provider is not called a second time');
});

t.test('a retry waiting on a key stored as sent, which is freed meanwhile, stores only the digest', async (t) => {
  const database = await freshDatabase(t);
  const gw = await submitGateway(t, { database });
  await gw.app.ready();
  await passFinished(database);
  const key = `waiting-${CPF}`;
  const body = validRequest({ customerUuid: 'waiting-1' });
  // An instance of the version before holds the key (as sent) for an attempt in progress.
  await sql`insert into idempotency_keys (key, body_hash, created_at, expires_at)
    values (${key}, ${bodyHash(body)}, ${new Date()}, ${new Date(Date.now() + 3600_000)})`.execute(database.db);
  const retry = gw.submit(body, { 'idempotency-key': key });
  // The retry met the key held and waits for its answer (submit.ts logs it once): only then is it freed.
  await until(() => gw.logs.text().includes('waiting for the first request with this Idempotency-Key'), 10_000, 'the retry waiting');
  // That attempt answers 503 and frees the key: the waiting retry takes it.
  await sql`delete from idempotency_keys where key = ${key}`.execute(database.db);
  const answer = await retry;
  t.equal(answer.statusCode, 202, answer.body);
  t.same((await storedKeys(database)).map((k) => k.key), [earlier.digest(key)], 'the key row is the digest');
  t.same((await storedRequests(database)).map((r) => r.idempotency_key), [earlier.digest(key)], 'the request holds the digest');
  t.notOk((await dumpDatabase(database)).includes(key), 'the key as sent is nowhere');
});

t.test("a campaign key stored as sent more than a day ago: a new upload with it stores only the digest", async (t) => {
  const database = await freshDatabase(t);
  const gw = await submitGateway(t, { database });
  await gw.app.ready();
  await passFinished(database);
  await holdTheProvider(database.db);
  const key = `campaign-old-${CPF}`;
  const old = new Date(Date.now() - 25 * 3600_000);
  // Uploaded by an instance of the version before after this instance's pass (a rolling deploy).
  await sql`insert into campaigns (public_id, source, created_by, created_at, updated_at, idempotency_key)
    values ('cmp_old', 'ndjson', 'key:x', ${old}, ${old}, ${key})`.execute(database.db);
  const first = await upload(gw.app, ndjson([line('campaign-old-1', 1)]), undefined, { 'idempotency-key': key });
  t.equal(first.statusCode, 202, first.body);
  const { rows } = await sql<{ public_id: string; idempotency_key: string | null }>`select public_id, idempotency_key from campaigns order by id`.execute(database.db);
  // The old campaign keeps what its version wrote until a pass rewrites it; the new one holds the digest.
  t.same(rows, [{ public_id: 'cmp_old', idempotency_key: key }, { public_id: first.json().id, idempotency_key: earlier.digest(key) }]);
});

t.test('the pass leaves a key within its 24 h as an instance of the version before stored it, and rewrites it past them', async (t) => {
  const database = await freshDatabase(t);
  const key = `rolling-${CPF}`;
  const body = validRequest({ customerUuid: 'rolling-1' });
  const now = new Date();
  // An instance of the version before, still running (a rolling deploy), answered a submit 502 and
  // took a campaign, each under the key as sent.
  const { rows } = await sql<{ id: number }>`
    insert into underwriting_requests (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, status, upstream_status, idempotency_key, submitted_at, updated_at)
    values (${body.customerUuid}, 'h', '***.982.247-**', true, 'submit_failed', 422, ${key}, ${now}, ${now}) returning id`.execute(database.db);
  const answer = { error: 'upstream_rejected', message: 'the provider refused the request (HTTP 422)', upstreamStatus: 422 };
  await sql`insert into idempotency_keys (key, body_hash, request_id, response_status, response_body, created_at, expires_at)
    values (${key}, ${bodyHash(body)}, ${rows[0]!.id}, 502, ${JSON.stringify(answer)}, ${now}, ${new Date(now.getTime() + 24 * 3600_000)})`.execute(database.db);
  await sql`insert into campaigns (public_id, source, created_by, created_at, updated_at, idempotency_key)
    values ('cmp_rolling', 'ndjson', 'key:x', ${now}, ${now}, ${key})`.execute(database.db);

  // A new instance starts: its pass runs while that instance still answers retries.
  await digestStoredKeys(database.db, earlier, () => new Date(), new AbortController().signal);
  // What the version before does with a retry (the statements it sends, the key as sent): it must
  // still find the key's answer, its request and its campaign, or it calls the provider again.
  const claim = await claimKey(database.db, { key, hash: bodyHash(body), now: new Date(), leaseMs: 12_000 });
  t.same(claim.claimed ? 'claimed anew' : claim.row?.response_status, 502, 'the old instance replays the 502');
  t.ok(await requestOfKey(database.db, [key], new Date()), 'and finds the request under the key as sent');
  const campaign = await claimCampaignKey(database.db, { key, publicId: 'cmp_other', source: 'ndjson', createdBy: 'key:x', now: new Date() });
  t.same('holder' in campaign ? campaign.holder?.public_id : 'claimed anew', 'cmp_rolling', 'and the campaign it holds');

  // Past the key's 24 h no instance of any version reads it under its key: the pass rewrites it.
  const later = new Date(now.getTime() + 24 * 3600_000 + 60_000);
  await digestStoredKeys(database.db, earlier, () => later, new AbortController().signal);
  t.notOk((await dumpDatabase(database)).includes(key), 'the key as sent is nowhere');
  t.same((await storedRequests(database)).map((r) => r.idempotency_key), [earlier.digest(key)]);
});
