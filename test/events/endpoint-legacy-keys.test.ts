import { createHash, randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { FileMigrationProvider, type Kysely, Migrator, sql } from 'kysely';
import t from 'tap';
import { migrateToLatest } from '../../src/db/migrator.js';
import { urlKeyer } from '../../src/events/url-key.js';
import { TEST_CPF_HASH_KEY } from '../helpers/app.js';
import { freshDatabase, type TestDatabaseHandle } from '../helpers/database.js';
import { dumpDatabase, dumpForms } from '../personal-data/fixtures.js';
import { adminGateway, call } from './admin.js';
import { pushEnv, webhookSecret } from './fixtures.js';

// Configured endpoints (EVENT_WEBHOOK_URLS) were once named by the unsalted SHA-256 of their URL:
// their id was "ep_<hash>" and their key (the endpoint row's, the dispatch position's and the
// deliveries' url_key) the hash itself, so that a dump let anyone confirm a guessed URL. Rows
// written in that form, through the schema of the time: migrated, the old ids are nowhere in the
// database; once an instance has started, no hash of the URLs either (pg_dump on PostgreSQL, and
// every row as text on both engines).

const MIGRATIONS = fileURLToPath(new URL('../../migrations', import.meta.url));

/** Applies the migrations up to and including `name` (the schema of that time). */
async function migrateUpTo(db: Kysely<unknown>, name: string): Promise<void> {
  const migrator = new Migrator({ db, provider: new FileMigrationProvider({ fs, path, migrationFolder: MIGRATIONS }) });
  const { error } = await migrator.migrateTo(name);
  if (error) throw error;
}

/** A configured URL's key before: the first 32 hex digits of its unsalted SHA-256. */
const legacyKey = (url: string) => createHash('sha256').update(url).digest('hex').slice(0, 32);

/** The ids (or forms of them) of `needles` found in the dump. */
const foundIn = (dump: string, needles: Record<string, string>) =>
  Object.entries(needles).flatMap(([what, needle]) => dumpForms(needle).filter((form) => dump.includes(form)).map((form) => `${what}: ${form}`));

const URLS = {
  kept: `http://127.0.0.1:9/kept?token=weak-${randomBytes(3).toString('hex')}`,
  gone: `http://127.0.0.1:9/gone?token=weak-${randomBytes(3).toString('hex')}`,
  late: `http://127.0.0.1:9/late?token=weak-${randomBytes(3).toString('hex')}`,
};

/**
 * A database as it stood before migration 0016, with (after 0019) a configured row written by an
 * instance still running the old code. `kept`: a configured endpoint that was disabled (its audit
 * entry, its endpoint.disabled event and that event's deliveries); `gone`: one whose row was since
 * deleted by hand (its dispatch position, deliveries and mentions stay); `late`: written with an
 * old id after 0016; `api`: an API endpoint, whose random id must stay.
 */
async function seedLegacyDatabase(database: TestDatabaseHandle) {
  const db = database.db as unknown as Kysely<unknown>;
  const keys = { kept: legacyKey(URLS.kept), gone: legacyKey(URLS.gone), late: legacyKey(URLS.late) };
  const old = { kept: `ep_${keys.kept}`, gone: `ep_${keys.gone}`, late: `ep_${keys.late}` };
  const api = `ep_${randomBytes(16).toString('hex')}`;
  await migrateUpTo(db, '0015_mask_free_text_cpfs');
  const shown = (url: string) => url.replace(/token=[^&]*/, 'token=redacted');
  await sql`insert into event_endpoints (id, key, managed, url, shown_url, status, disabled_reason, created_at, updated_at)
            values (${old.kept}, ${keys.kept}, 'config', ${shown(URLS.kept)}, ${shown(URLS.kept)}, 'disabled', 'every attempt failed', now(), now()),
                   (${api}, ${api}, 'api', 'http://127.0.0.1:9/api', 'http://127.0.0.1:9/api', 'active', null, now(), now())`.execute(db);
  await sql`insert into event_dispatch (url_key, url, tx_id, event_id, updated_at)
            values (${keys.kept}, ${shown(URLS.kept)}, pg_current_xact_id(), 0, now()),
                   (${keys.gone}, ${shown(URLS.gone)}, pg_current_xact_id(), 0, now()),
                   (${api}, 'http://127.0.0.1:9/api', pg_current_xact_id(), 0, now())`.execute(db);
  await sql`insert into events (public_id, type, customer_uuid, created_at, data)
            values ('evt_kept', 'endpoint.disabled', ${old.kept}, now(), jsonb_build_object('endpointId', ${old.kept}::text, 'url', ${shown(URLS.kept)}::text)),
                   ('evt_gone', 'endpoint.disabled', ${old.gone}, now(), jsonb_build_object('endpointId', ${old.gone}::text, 'url', ${shown(URLS.gone)}::text)),
                   ('evt_plain', 'callback.unmatched', 'cust-plain', now(), '{}'::jsonb)`.execute(db);
  const delivery = (event: string, key: string, url: string, status: string) => sql`
    insert into event_deliveries (event_id, customer_uuid, url_key, url, status, queued_at, next_attempt_at)
    select id, customer_uuid, ${key}, ${url}, ${status}, now(), now() from events where public_id = ${event}`.execute(db);
  await delivery('evt_kept', keys.kept, shown(URLS.kept), 'pending');
  await delivery('evt_kept', api, 'http://127.0.0.1:9/api', 'delivered');
  await delivery('evt_gone', keys.kept, shown(URLS.kept), 'pending');
  await delivery('evt_gone', api, 'http://127.0.0.1:9/api', 'delivered');
  await delivery('evt_plain', keys.gone, shown(URLS.gone), 'delivered');
  await delivery('evt_plain', keys.kept, shown(URLS.kept), 'dead');
  await sql`insert into audit_log (action, actor, subject, counts)
            values ('endpoint.update', 'k', ${`endpoint:${old.kept}`}, '{}'::jsonb),
                   ('endpoint.replay', 'k', ${`endpoint:${old.gone}`}, '{}'::jsonb),
                   ('endpoint.create', 'k', ${`endpoint:${api}`}, '{}'::jsonb)`.execute(db);
  // An instance still on the old code writes a configured URL's row as it did (0016 has run).
  await migrateUpTo(db, '0019_events_type_feed');
  await sql`insert into event_endpoints (id, key, managed, url, shown_url, status, created_at, updated_at)
            values (${old.late}, ${keys.late}, 'config', ${shown(URLS.late)}, ${shown(URLS.late)}, 'active', now(), now())`.execute(db);
  await sql`insert into audit_log (action, actor, subject, counts) values ('endpoint.update', 'k', ${`endpoint:${old.late}`}, '{}'::jsonb)`.execute(db);
  return { keys, old, api };
}

t.test('migration 0020: no stored id is a configured URL\'s hash any more; each names its endpoint as it did', async (t) => {
  const database = await freshDatabase(t, { migrate: false });
  const { keys, old, api } = await seedLegacyDatabase(database);
  const applied = await migrateToLatest(database);
  t.ok(applied.includes('0020_endpoint_hash_ids'), 'applied 0020');

  t.same(foundIn(await dumpDatabase(database), old), [], database.url ? 'no old id in pg_dump nor in any row' : 'no old id in any row');

  const { db } = database;
  const idOf = async (key: string) => (await db.selectFrom('event_endpoints').select('id').where('key', '=', key).executeTakeFirstOrThrow()).id;
  const kept = await idOf(keys.kept);
  const late = await idOf(keys.late);
  t.match(kept, /^ep_[0-9a-f]{32}$/);
  t.match(late, /^ep_[0-9a-f]{32}$/);
  t.equal(await idOf(api), api, "an API endpoint's id stays");
  const subjects = (await db.selectFrom('audit_log').select(['action', 'subject']).orderBy('id').execute()).map((r) => r.subject);
  const [, gone] = subjects;
  t.match(gone, /^endpoint:ep_[0-9a-f]{32}$/);
  const goneId = gone!.slice('endpoint:'.length);
  t.not(goneId, old.gone, 'the endpoint whose row is gone has a new id');
  t.not(late, old.late, 'and so has the row written with an old id after 0016');
  t.same(subjects, [`endpoint:${kept}`, gone, `endpoint:${api}`, `endpoint:${late}`], 'audit subjects name the current ids');
  const events = await db.selectFrom('events').select(['public_id', 'customer_uuid', 'data']).orderBy('id').execute();
  t.match(events, [
    { public_id: 'evt_kept', customer_uuid: kept, data: { endpointId: kept } },
    { public_id: 'evt_gone', customer_uuid: goneId, data: { endpointId: goneId } },
    { public_id: 'evt_plain', customer_uuid: 'cust-plain' },
  ], 'endpoint.disabled events name them too (the endpoint whose row is gone by one new id, the same everywhere)');
  const deliveries = await sql<{ public_id: string; customer_uuid: string }>`
    select e.public_id, d.customer_uuid from event_deliveries d join events e on e.id = d.event_id order by d.id`.execute(db);
  t.same(deliveries.rows.map((r) => [r.public_id, r.customer_uuid]), [
    ['evt_kept', kept],
    ['evt_kept', kept],
    ['evt_gone', goneId],
    ['evt_gone', goneId],
    ['evt_plain', 'cust-plain'],
    ['evt_plain', 'cust-plain'],
  ], "their deliveries name their event's customer");
});

t.test("an instance's start re-keys every configured URL's rows under CPF_HASH_KEY: no unsalted hash of a URL is stored, and each endpoint keeps its id and its deliveries", async (t) => {
  const database = await freshDatabase(t, { migrate: false });
  const { keys, api } = await seedLegacyDatabase(database);
  await migrateToLatest(database);
  const { db } = database;
  const idOf = async (key: string) => (await db.selectFrom('event_endpoints').select('id').where('key', '=', key).executeTakeFirstOrThrow()).id;
  const keptId = await idOf(keys.kept);
  const lateId = await idOf(keys.late);
  const deliveriesOf = async (key: string) =>
    (await sql<{ public_id: string; status: string }>`
      select e.public_id, d.status from event_deliveries d join events e on e.id = d.event_id where d.url_key = ${key} order by d.id`.execute(db)).rows;
  const keptBefore = await deliveriesOf(keys.kept);
  t.equal(keptBefore.length, 3);

  // One instance, configured with one of the three URLs: the other two (one of them no longer
  // configured anywhere) are re-keyed all the same.
  const hashes = Object.fromEntries(
    Object.entries(URLS).flatMap(([what, url]) => [[`${what} key`, legacyKey(url)], [`${what} SHA-256`, createHash('sha256').update(url).digest('hex')]]),
  );
  const { app, logs } = await adminGateway(t, database, pushEnv([URLS.kept], webhookSecret()));
  t.same(foundIn(await dumpDatabase(database), hashes), [], database.url ? 'no hash of a URL in pg_dump nor in any row' : 'no hash of a URL in any row');

  const keyer = urlKeyer([TEST_CPF_HASH_KEY]);
  const kept = keyer.key(URLS.kept);
  t.match(kept, /^ck_[0-9a-f]{32}$/);
  t.equal(await idOf(kept), keptId, 'the configured endpoint keeps its id');
  t.same(await deliveriesOf(kept), keptBefore, 'and its deliveries');
  t.equal((await db.selectFrom('event_dispatch').select('url_key').where('url_key', '=', kept).execute()).length, 1, 'and its dispatch position');
  t.equal(await idOf(keyer.key(URLS.late)), lateId, 'an endpoint configured elsewhere keeps its row');
  t.same(await deliveriesOf(keyer.key(URLS.gone)), [{ public_id: 'evt_plain', status: 'delivered' }], "a URL configured nowhere keeps its deliveries, re-keyed");
  t.equal(await idOf(api), api, 'an API endpoint is untouched');
  const listed = (await call(app, 'GET', '/v1/endpoints')).body.items as Array<{ id: string; managed: string; stats: { dead: number } }>;
  t.match(listed.find((e) => e.managed === 'config'), { id: keptId, stats: { dead: 1 } }, 'listed with its id and its history');
  t.match(logs.text(), /event endpoint keys re-keyed/, 'the re-keying is logged');
  await app.close();

  // CPF_HASH_KEY rotated (a new key in front): the next start re-keys the configured URL's rows under it.
  const rotated = `rotated-cpf-hash-key-${randomBytes(12).toString('hex')}`;
  const { app: next } = await adminGateway(t, database, pushEnv([URLS.kept], webhookSecret(), { CPF_HASH_KEY: `${rotated},${TEST_CPF_HASH_KEY}` }));
  const keptRotated = urlKeyer([rotated]).key(URLS.kept);
  t.not(keptRotated, kept);
  t.equal(await idOf(keptRotated), keptId, 'after a rotation of CPF_HASH_KEY the endpoint keeps its id');
  t.same(await deliveriesOf(keptRotated), keptBefore, 'and its deliveries');
  t.same(await deliveriesOf(kept), [], 'nothing left under the previous key');
  t.match((await call(next, 'GET', '/v1/endpoints')).body.items.find((e: { managed: string }) => e.managed === 'config'), { id: keptId });
});
