import { setTimeout } from 'node:timers/promises';
import { sql } from 'kysely';
import t from 'tap';
import { ensureSlots, returnSlot, takeSlot } from '../../src/provider/sql.js';
import { freshDatabase } from '../helpers/database.js';

// The shared pace's statements on their own (src/provider/sql.ts): what a slot's return writes.

const limits = { maxRps: 50, maxInFlight: 4, circuitFailures: 3 };
const circuit = { circuitFailures: 3, circuitOpenS: 30 };

t.test('an answered call gives its slot back without writing the shared pace row; a failure, and the answer after it, do write it', async (t) => {
  const { db } = await freshDatabase(t);
  await ensureSlots(db, limits.maxInFlight);
  // The row every take locks: its version (xmin) changes whenever a statement writes it.
  const version = async () => (await sql<{ v: string }>`select xmin::text as v from provider_pacing where id = 1`.execute(db)).rows[0]!.v;
  const leased = async (slot: number) =>
    (await sql<{ n: number }>`select count(*)::int as n from provider_slots where slot = ${slot} and lease_until > clock_timestamp()`.execute(db)).rows[0]!.n;

  // A take in the last 300 ms of a second, or too soon after the previous one, is refused until a known time: taken then.
  const take = async (holder: string) => {
    for (;;) {
      const taken = await takeSlot(db, limits, holder, 60_000);
      if (taken.slot !== null) return taken.slot;
      if (taken.refusal !== 'rate' || taken.untilMs === null) throw new Error(`no slot: ${taken.refusal}`);
      await setTimeout(Math.max(1, taken.untilMs - taken.nowMs));
    }
  };

  const first = await take('h:1');
  t.equal(await leased(first), 1, 'the slot is leased while its call runs');
  const before = await version();
  t.equal(await returnSlot(db, { slot: first, holder: 'h:1', outcome: 'answered', probe: false, holdS: null, ...circuit }), 0);
  t.equal(await version(), before, 'an answer with no failure behind it leaves the shared row as it was (no lock, no write)');
  t.equal(await leased(first), 0, 'its slot is free again');

  const second = await take('h:2');
  const beforeFailure = await version();
  t.equal(await returnSlot(db, { slot: second, holder: 'h:2', outcome: 'failed', probe: false, holdS: null, ...circuit }), 1, 'a failure counts');
  t.not(await version(), beforeFailure, 'a failure writes the shared row');

  // The failure's backoff (50 ms) holds the next take: wait it out in the database's own time.
  await sql`update provider_pacing set hold_until = '-infinity' where id = 1`.execute(db);
  const third = await take('h:3');
  const beforeAnswer = await version();
  t.equal(await returnSlot(db, { slot: third, holder: 'h:3', outcome: 'answered', probe: false, holdS: null, ...circuit }), 0, 'the answer after it resets the count');
  t.not(await version(), beforeAnswer, 'an answer after failures writes the shared row');

  const fourth = await take('h:4');
  const beforeHold = await version();
  await returnSlot(db, { slot: fourth, holder: 'h:4', outcome: 'answered', probe: false, holdS: 2, ...circuit });
  t.not(await version(), beforeHold, "an answer with a Retry-After writes the hold");
  const { rows } = await sql<{ held: boolean }>`select hold_until > clock_timestamp() as held from provider_pacing where id = 1`.execute(db);
  t.equal(rows[0]!.held, true, 'and every instance is held');
});
