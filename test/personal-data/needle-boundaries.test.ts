import t from 'tap';
import { sql } from 'kysely';
import { freshDatabase } from '../helpers/database.js';
import { adminApp, insertInvalid, post, seedSubject } from './fixtures.js';

// An invalid callback naming no customer belongs to a subject when its raw bytes carry the
// subject's customerUuid (docs/personal-data.md): the whole identifier, never a prefix of
// another customer's ("cust-0001" is not "cust-00012"), else one subject's export hands out and
// its erasure deletes another customer's callback.

const database = await freshDatabase(t);

t.test("a customerUuid that is a prefix of another's takes none of the other's anonymous invalid callbacks", async (t) => {
  const { app } = await adminApp(t, { database });
  await seedSubject(database.db, 'needle-cust-0001', '52998224725');
  const other = '{"customerUuid":"needle-cust-00012","response":{"score":"oops';
  const own = '{"customerUuid":"needle-cust-0001","response":{"score":"oops';
  await insertInvalid(database.db, { customerUuid: null, raw: other });
  await insertInvalid(database.db, { customerUuid: null, raw: own });

  const exported = await post(app, '/v1/personal-data/export', { customerUuid: 'needle-cust-0001' });
  t.equal(exported.statusCode, 200);
  const raws = exported.json().invalid.map((i: { rawBody: string }) => i.rawBody);
  t.ok(raws.includes(own), "the subject's own anonymous invalid callback is exported");
  t.notOk(exported.body.includes('needle-cust-00012'), "another customer's callback is not in the export");

  const erased = await post(app, '/v1/personal-data/erase', { customerUuid: 'needle-cust-0001' });
  t.equal(erased.statusCode, 200);
  const left = await sql<{ raw: string }>`select convert_from(raw_body, 'UTF8') as raw from callbacks where customer_uuid is null`.execute(database.db);
  const kept = left.rows.map((r) => r.raw);
  t.ok(kept.includes(other), "another customer's callback survives the erasure");
  t.notOk(kept.includes(own), "the subject's own is erased");
});
