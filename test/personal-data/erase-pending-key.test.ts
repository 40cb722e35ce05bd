import { sql } from 'kysely';
import t from 'tap';
import { freshDatabase } from '../helpers/database.js';
import { keyAsStored } from '../submissions/fixtures.js';
import { adminApp, post, seedSubject } from './fixtures.js';

const refused = keyAsStored('idem-refused-409');

// An erasure deletes the idempotency keys its subject used. A key string outlives its 24 h and may
// be taken again by another customer's submit, still in progress (no answer yet): that row is not
// the subject's, and deleting it let the other submit's retry reach the provider a second time.

const database = await freshDatabase(t);

t.test("an erasure leaves a pending key of another customer's submit in progress, and deletes the subject's answered ones", async (t) => {
  const { app } = await adminApp(t, { database });
  await seedSubject(database.db, 'pending-key-subject', '52998224725');
  const key = keyAsStored('idem-pending-key-subject');
  // The subject's key expired and another customer's submit took it: pending, no request yet.
  await sql`update idempotency_keys set request_id = null, response_status = null, response_body = null, body_hash = ${'c'.repeat(64)},
            created_at = now(), expires_at = now() + interval '1 day' where key = ${key}`.execute(database.db);
  await sql`update underwriting_requests set idempotency_key = ${refused} where customer_uuid = 'pending-key-subject' and idempotency_key is null`.execute(database.db);
  // And a key the subject used that was answered 409 in_flight (no request of its own).
  await sql`insert into idempotency_keys (key, body_hash, request_id, response_status, response_body, expires_at)
            values (${refused}, ${'d'.repeat(64)}, null, 409, '{"error":"in_flight"}', now() + interval '1 day')`.execute(database.db);

  const erased = await post(app, '/v1/personal-data/erase', { customerUuid: 'pending-key-subject' });
  t.equal(erased.statusCode, 200, erased.body);
  const left = (await sql<{ key: string }>`select key from idempotency_keys order by key`.execute(database.db)).rows.map((r) => r.key);
  t.ok(left.includes(key), "the other customer's pending key is still there");
  t.notOk(left.includes(refused), "the subject's answered key is gone");
});
