import { sql } from 'kysely';
import t from 'tap';
import { ensureSlots, returnSlot } from '../../src/provider/sql.js';
import { markForwarded } from '../../src/submissions/queue.js';
import { freshDatabase } from '../helpers/database.js';

// The forward's outcome (src/submissions/queue.ts: mark_forwarded) on its own: the provider's answer
// is written after the call returns, and with a provider that answers its callback at once the
// callback can complete the request first.

t.test('a forward answered after its callback completed the request keeps the provider\'s status; only a request still being sent becomes submitted, with its event', async (t) => {
  const { db } = await freshDatabase(t);
  const now = new Date();
  const insert = async (customer: string, status: string) =>
    (
      await sql<{ id: number }>`
        insert into underwriting_requests (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, status, submitted_at, updated_at, completed_at, decision)
        values (${customer}, 'h', '***.456.789-**', false, ${status}, ${now}, ${now},
                ${status === 'completed' ? now : null}, ${status === 'completed' ? 'approved' : null})
        returning id`.execute(db)
    ).rows[0]!.id;
  const raced = await insert('mf-raced', 'completed');
  const sending = await insert('mf-sending', 'submitting');

  await markForwarded(db, Number(raced), 202, new Date(now.getTime() + 5));
  await markForwarded(db, Number(sending), 202, new Date(now.getTime() + 5));

  const row = async (id: number) =>
    (await sql<{ status: string; upstream_status: number | null; decision: string | null }>`
      select status, upstream_status, decision from underwriting_requests where id = ${id}`.execute(db)).rows[0]!;
  t.same(await row(raced), { status: 'completed', upstream_status: 202, decision: 'approved' }, 'the completed request keeps its result and gains the provider\'s answer');
  t.same(await row(sending), { status: 'submitted', upstream_status: 202, decision: null });
  const events = async (customer: string) =>
    (await sql<{ type: string }>`select type from events where customer_uuid = ${customer} order by id`.execute(db)).rows.map((r) => r.type);
  t.same(await events('mf-raced'), [], 'no submitted event after the completion');
  t.same(await events('mf-sending'), ['underwriting.submitted']);
});

t.test('a forward\'s acceptance gives its call\'s slot back in the same statement, and an answer after failures closes the circuit', async (t) => {
  const { db } = await freshDatabase(t);
  // The slots are leased by hand: this test is about what the forward's outcome gives back, not
  // about the take. A take of two at the first instant of a second (or of its tail) starts one call
  // only, whatever the rate (call n of the spread starts n * 700 / limit ms in), and PGlite's clock
  // reads whole milliseconds: CI's PGlite run once got [0] for [0, 1].
  await ensureSlots(db, 4);
  const lease = (slot: number, holder: string) =>
    sql`update provider_slots set lease_until = clock_timestamp() + interval '60 seconds', holder = ${holder} where slot = ${slot}`.execute(db);
  await lease(0, 'mf:1');
  await lease(1, 'mf:1');
  await lease(2, 'mf:2');
  await returnSlot(db, { slot: 2, holder: 'mf:2', outcome: 'failed', probe: false, holdS: null, circuitFailures: 3, circuitOpenS: 30 });
  const failures = async () => (await sql<{ failures: number }>`select failures from provider_pacing where id = 1`.execute(db)).rows[0]!.failures;
  const leased = async () => (await sql<{ slot: number }>`select slot from provider_slots where lease_until > clock_timestamp() order by slot`.execute(db)).rows.map((r) => r.slot);
  t.equal(await failures(), 1);
  const id = (await sql<{ id: number }>`
    insert into underwriting_requests (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, status, submitted_at, updated_at)
    values ('mf-slot', 'h', '***.456.789-**', false, 'submitting', now(), now()) returning id`.execute(db)).rows[0]!.id;

  await markForwarded(db, Number(id), 202, new Date(), { slot: 0, holder: 'mf:1' });
  t.same(await leased(), [1], 'slot 0 free again, slot 1 still leased');
  t.equal(await failures(), 0, 'the answer reset the failures');
  await markForwarded(db, Number(id), 202, new Date(), { slot: 1, holder: 'someone-else' });
  t.same(await leased(), [1], 'a slot is freed only by its holder');
});
