import { getEventListeners } from 'node:events';
import { sql } from 'kysely';
import t from 'tap';
import { digestStoredKeys, keepDigestingKeys, KEY_DIGEST_PASS, PASS_GOES_ON_MS } from '../../src/requests/key-digest-pass.js';
import { isKeyDigest, keyDigester } from '../../src/requests/key-digest.js';
import { bodyHash } from '../../src/requests/idempotency.js';
import { TEST_CPF_HASH_KEY } from '../helpers/app.js';
import { freshDatabase } from '../helpers/database.js';
import { until } from '../helpers/until.js';
import { holdTheProvider, line, ndjson, upload } from '../campaigns/fixtures.js';
import { dumpDatabase, dumpForms } from '../personal-data/fixtures.js';
import { CPF, storedKeys, storedRequests, submitGateway, validRequest } from '../submissions/fixtures.js';

// An Idempotency-Key is the client's choice, and clients build keys from what they have (a CPF,
// an account number): it is stored only as a keyed digest (src/requests/key-digest.ts), and keys
// an earlier version stored as sent are found, then rewritten (src/requests/key-digest-pass.ts).

const digests = keyDigester([TEST_CPF_HASH_KEY]);
const never = new AbortController().signal;

t.test('a submit key holding a CPF reaches no table, and is replayed, refused with another body, as any key', async (t) => {
  const database = await freshDatabase(t);
  const { submit, provider } = await submitGateway(t, { database });
  const key = `proposal-${CPF}-1`;
  const first = await submit(validRequest(), { 'idempotency-key': key });
  t.equal(first.statusCode, 202, first.body);
  const again = await submit(validRequest(), { 'idempotency-key': key });
  t.equal(again.headers['idempotent-replayed'], 'true');
  t.equal((await submit(validRequest({ customerUuid: 'someone-else' }), { 'idempotency-key': key })).statusCode, 422);
  t.equal(provider.received.length, 1, 'one provider call');

  const [row] = await storedRequests(database);
  t.equal(row!.idempotency_key, digests.digest(key), 'the request holds the digest');
  t.ok(isKeyDigest(row!.idempotency_key!));
  t.equal((await storedKeys(database))[0]!.key, digests.digest(key), 'the key row is named by the digest');
  const dump = await dumpDatabase(database);
  for (const form of [...dumpForms(key), ...dumpForms(CPF)]) t.notOk(dump.includes(form), `the dump holds no ${form}`);
});

t.test('a queued submit (Prefer: respond-async) stores the digest too', async (t) => {
  const database = await freshDatabase(t);
  const { submit } = await submitGateway(t, { database });
  const key = `queued-${CPF}`;
  const first = await submit(validRequest(), { 'idempotency-key': key, prefer: 'respond-async' });
  t.equal(first.statusCode, 202, first.body);
  t.equal((await storedRequests(database))[0]!.idempotency_key, digests.digest(key));
  t.notOk((await dumpDatabase(database)).includes(key));
});

t.test("a campaign's key holding a CPF reaches no table; the same file with it is the same campaign", async (t) => {
  const database = await freshDatabase(t);
  const { app } = await submitGateway(t, { database });
  await holdTheProvider(database.db);
  const key = `campaign-${CPF}`;
  const file = ndjson([line('digest-c-1', 1)]);
  const first = await upload(app, file, undefined, { 'idempotency-key': key });
  t.equal(first.statusCode, 202, first.body);
  const again = await upload(app, file, undefined, { 'idempotency-key': key });
  t.equal(again.headers['idempotent-replayed'], 'true');
  t.equal(again.json().id, first.json().id);
  const { rows } = await sql<{ idempotency_key: string }>`select idempotency_key from campaigns`.execute(database.db);
  t.same(rows, [{ idempotency_key: digests.digest(key) }]);
  t.notOk((await dumpDatabase(database)).includes(key));
});

const passFinished = (database: Awaited<ReturnType<typeof freshDatabase>>) =>
  until(async () => (await database.db.selectFrom('maintenance_passes').select('finished_at').where('name', '=', KEY_DIGEST_PASS).executeTakeFirst())?.finished_at ?? undefined, 20_000, 'the pass at start');

/** What a version before digests left (at `now`): a key row, its request and a campaign, each holding the key as sent. */
async function storedAsSent(database: Awaited<ReturnType<typeof freshDatabase>>, key: string, body: ReturnType<typeof validRequest>, answer: object, now = new Date()) {
  const { rows } = await sql<{ id: number }>`
    insert into underwriting_requests (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, status, idempotency_key, submitted_at, updated_at)
    values (${body.customerUuid}, 'h', '***.982.247-**', true, 'submitted', ${key}, ${now}, ${now}) returning id`.execute(database.db);
  await sql`insert into idempotency_keys (key, body_hash, request_id, response_status, response_body, created_at, expires_at)
    values (${key}, ${bodyHash(body)}, ${rows[0]!.id}, 202, ${JSON.stringify(answer)}, ${now}, ${new Date(now.getTime() + 24 * 3600_000)})`.execute(database.db);
  await sql`insert into campaigns (public_id, source, created_by, created_at, updated_at, idempotency_key) values ('cmp_old', 'ndjson', 'key:x', ${now}, ${now}, ${key})`.execute(database.db);
}

t.test('a key an earlier version stored as sent: its retry is replayed, and the pass stores it as a digest once its 24 h are over', async (t) => {
  const database = await freshDatabase(t);
  const { app, submit, provider } = await submitGateway(t, { database });
  // The instance's own pass at start is over (on an empty database) before an instance of the
  // version before stores the key as sent: a rolling deploy.
  await app.ready();
  await passFinished(database);
  const key = `legacy-${CPF}`;
  const body = validRequest({ customerUuid: 'legacy-1' });
  const answer = { customerUuid: 'legacy-1', status: 'submitted', upstreamStatus: 202, submittedAt: new Date().toISOString() };
  await storedAsSent(database, key, body, answer);

  const retry = await submit(body, { 'idempotency-key': key });
  t.equal(retry.headers['idempotent-replayed'], 'true', 'found under the key as sent');
  t.same(retry.json(), answer);
  t.equal(provider.received.length, 0, 'not sent a second time');

  // Within its 24 h an instance of the version before may still look it up as sent: left as it is.
  t.same(await digestStoredKeys(database.db, digests, () => new Date(), never), { idempotencyKeys: 0, requests: 0, campaigns: 0 });
  const again = await submit(body, { 'idempotency-key': key });
  t.equal(again.headers['idempotent-replayed'], 'true', 'found under the key as sent still');
  t.equal(provider.received.length, 0);

  const dayAfter = new Date(Date.now() + 24 * 3600_000 + 60_000);
  const done = await digestStoredKeys(database.db, digests, () => dayAfter, never);
  t.same(done, { idempotencyKeys: 1, requests: 1, campaigns: 1 }, 'past its 24 h: the row deleted, the request and campaign rewritten');
  t.notOk((await dumpDatabase(database)).includes(key), 'the key as sent is nowhere');

  const pass = await database.db.selectFrom('maintenance_passes').selectAll().where('name', '=', KEY_DIGEST_PASS).executeTakeFirstOrThrow();
  t.ok(pass.finished_at, 'the pass is finished');
  t.ok(Number(pass.through_id) > 0, 'and records how far it read');
  t.same(await digestStoredKeys(database.db, digests, () => dayAfter, never), { idempotencyKeys: 0, requests: 0, campaigns: 0 }, 'a second start finds nothing left');
  const later = new Date(pass.finished_at!.getTime() + PASS_GOES_ON_MS + 1000);
  t.equal(await digestStoredKeys(database.db, digests, () => later, never), undefined, 'over once it has gone on long enough');
});

t.test("a start rewrites an earlier version's keys by itself", async (t) => {
  const database = await freshDatabase(t);
  const key = `at-start-${CPF}`;
  // A day and more before: past the key's 24 h.
  await storedAsSent(database, key, validRequest({ customerUuid: 'at-start-1' }), {}, new Date(Date.now() - 25 * 3600_000));
  const { app, logs } = await submitGateway(t, { database });
  await app.ready();
  const said = await until(() => logs.entries().find((e) => /now stored as digests/.test(String(e.msg))), 20_000, 'the pass at start');
  t.same(said.rewritten, { idempotencyKeys: 1, requests: 1, campaigns: 1 });
  t.notOk((await dumpDatabase(database)).includes(key));
  t.notOk(logs.text().includes(key), 'nor any log line');
});

t.test('after a CPF_HASH_KEY rotation, a key stored under the earlier key is still found', async (t) => {
  const database = await freshDatabase(t);
  const key = 'rotation-key-1';
  const before = await submitGateway(t, { database });
  const body = validRequest({ customerUuid: 'rotation-1' });
  t.equal((await before.submit(body, { 'idempotency-key': key })).statusCode, 202);
  const after = await submitGateway(t, { database: database, env: { CPF_HASH_KEY: `a-newer-cpf-hash-key-0123456789abcdef,${TEST_CPF_HASH_KEY}` } });
  const retry = await after.submit(body, { 'idempotency-key': key });
  t.equal(retry.headers['idempotent-replayed'], 'true');
  t.equal(before.provider.received.length + after.provider.received.length, 1, 'one provider call');
  const fresh = await after.submit(validRequest({ customerUuid: 'rotation-2' }), { 'idempotency-key': 'rotation-key-2' });
  t.equal(fresh.statusCode, 202);
  const stored = await storedKeys(database);
  t.equal(stored[1]!.key, keyDigester(['a-newer-cpf-hash-key-0123456789abcdef']).digest('rotation-key-2'), 'a new key under the newest');
});

t.test('the pass runs again by itself while it is not over: a key stored as sent after its first run is rewritten with no restart', async (t) => {
  const database = await freshDatabase(t);
  // What the runs rewrote, added up (a run may meet the rows below while they are being written).
  const total = { idempotencyKeys: 0, requests: 0, campaigns: 0 };
  const lines: Array<{ msg: string }> = [];
  let said: (() => void) | undefined;
  const log = {
    info: (o: { rewritten: typeof total }, msg: string) => {
      lines.push({ msg });
      for (const k of Object.keys(total) as Array<keyof typeof total>) total[k] += o.rewritten[k];
      if (total.idempotencyKeys + total.requests + total.campaigns === 3) said?.();
    },
    warn: (_: unknown, msg: string) => lines.push({ msg }),
  };
  const closing = new AbortController();
  t.teardown(() => closing.abort());
  keepDigestingKeys({ db: database.db, digests, now: () => new Date(), log: log as never, signal: closing.signal, everyMs: 50 });
  await passFinished(database);
  const key = `between-runs-${CPF}`;
  const rewritten = new Promise<void>((resolve) => (said = resolve));
  await storedAsSent(database, key, validRequest({ customerUuid: 'between-runs-1' }), {}, new Date(Date.now() - 25 * 3600_000));
  await rewritten;
  t.same(total, { idempotencyKeys: 1, requests: 1, campaigns: 1 });
  t.match(lines, [{ msg: 'Idempotency-Keys stored as sent by an earlier version are now stored as digests' }]);
  t.notOk((await dumpDatabase(database)).includes(key));
});

t.test('the pass run again and again holds one abort listener, however many times it has run', async (t) => {
  const database = await freshDatabase(t);
  const closing = new AbortController();
  t.teardown(() => closing.abort());
  let reads = 0;
  const now = () => {
    reads += 1;
    return new Date();
  };
  const log = { info: () => {}, warn: () => {} };
  keepDigestingKeys({ db: database.db, digests, now, log: log as never, signal: closing.signal, everyMs: 1 });
  // Each run reads the clock more than once: 40 reads are more than 11 runs (Node warns of a leak past 10 listeners).
  await until(() => reads >= 40 || undefined, 20_000, 'the runs');
  t.ok(getEventListeners(closing.signal, 'abort').length <= 1, `${getEventListeners(closing.signal, 'abort').length} abort listeners`);
});

t.test('a run that fails because the instance is closing is not warned about; one that fails otherwise is, and the next run goes on', async (t) => {
  // Every statement of the pass fails here (no tables), as one does on a pool ended under it at shutdown.
  const failing = await freshDatabase(t, { migrate: false });
  for (const closingFirst of [true, false]) {
    const warned: string[] = [];
    const log = { info: () => {}, warn: (_: unknown, msg: string) => warned.push(msg) };
    const closing = new AbortController();
    if (closingFirst) closing.abort();
    const pass = keepDigestingKeys({ db: failing.db, digests, now: () => new Date(), log: log as never, signal: closing.signal, everyMs: 3600_000 });
    await pass.settled();
    closing.abort();
    t.same(warned, closingFirst ? [] : ['could not rewrite Idempotency-Keys stored as sent; the next run goes on'], closingFirst ? 'closing: nothing warned' : 'open: warned');
  }
});
