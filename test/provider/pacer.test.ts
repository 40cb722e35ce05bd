import { sql } from 'kysely';
import t from 'tap';
import type { FastifyBaseLogger } from 'fastify';
import { createPacer } from '../../src/provider/pacing.js';
import { freshDatabase } from '../helpers/database.js';

// The pacer (src/provider/pacing.ts) on a real database: what its permits and waiters do at the edges.

const config = { maxRps: 1000, maxInFlight: 4, circuitFailures: 3, circuitOpenS: 30 };
const log = { warn: () => {}, info: () => {}, debug: () => {}, error: () => {} } as unknown as FastifyBaseLogger;
const leased = async (db: Awaited<ReturnType<typeof freshDatabase>>['db']) =>
  (await sql<{ slot: number }>`select slot from provider_slots where lease_until > clock_timestamp() order by slot`.execute(db)).rows.map((r) => r.slot);

t.test('a waiter whose signal is already aborted is refused at once, even while the provider holds every call', async (t) => {
  const { db } = await freshDatabase(t);
  await sql`update provider_pacing set hold_until = now() + interval '1 day'`.execute(db);
  const pacer = createPacer({ db, config, leaseMs: 60_000, log });
  t.teardown(() => pacer.close());
  const stopped = new AbortController();
  stopped.abort();
  const started = performance.now();
  const result = await pacer.acquire({ priority: 'queue', signal: stopped.signal });
  t.same(result, { refused: { reason: 'closing', retryAfterS: 1 } });
  t.ok(performance.now() - started < 1_000, 'without waiting for the next ask');
});

t.test('a handed-over slot whose statement failed goes back on its own, not when its lease runs out', async (t) => {
  const { db } = await freshDatabase(t);
  const pacer = createPacer({ db, config, leaseMs: 60_000, log });
  t.teardown(() => pacer.close());
  const result = await pacer.acquire({ priority: 'sync' });
  if (!('permit' in result)) throw new Error('no slot');
  t.same(await leased(db), [0], 'slot 0 leased');
  const slot = result.permit.handOver();
  t.ok(slot, 'not a probe: handed over');
  t.equal(result.permit.handOver(), undefined, 'once');
  slot!.settled(false);
  // The return runs in the background: wait for it by taking every slot there is.
  const all = await Promise.all(Array.from({ length: 4 }, () => pacer.acquire({ priority: 'sync', deadline: performance.now() + 5_000 })));
  t.ok(all.every((r) => 'permit' in r), 'all four slots can be had again: the failed one came back');
  for (const r of all) if ('permit' in r) await r.permit.release('not_called');
});

t.test("a waiter waiting for the pace's next slot is not asked for again before it comes: not by another acquire, nor by a slot's return", async (t) => {
  const { db } = await freshDatabase(t);
  // 2 calls a second: a take refused for the rate says when the next slot comes (350 ms on, or the
  // second's tail).
  const verdicts: string[] = [];
  let onRefused: (() => void) | undefined;
  const pacer = createPacer({
    db,
    config: { ...config, maxRps: 2 },
    leaseMs: 60_000,
    log,
    onAsk: (verdict) => {
      verdicts.push(verdict);
      if (verdict !== 'ok') onRefused?.();
    },
  });
  t.teardown(() => pacer.close());
  const permitOf = (result: Awaited<ReturnType<typeof pacer.acquire>>) => {
    if (!('permit' in result)) throw new Error(`refused: ${JSON.stringify(result)}`);
    return result.permit;
  };
  let permit = permitOf(await pacer.acquire({ priority: 'queue' }));
  // As the forwarder does: the next slot asked for while the last call is under way, whose slot
  // goes back once that waiter has been told to wait (a waiter that cannot wait comes and goes first).
  const calls = 6;
  let waits = 0;
  for (let i = 0; i < calls; i++) {
    let waiting = false;
    const refused = new Promise<void>((resolve) => (onRefused = () => resolve(void (waiting = true))));
    const next = pacer.acquire({ priority: 'queue' });
    await Promise.race([refused, next]);
    onRefused = undefined;
    if (waiting) {
      // While the refusal's timer is surely pending (before the slot goes back).
      waits++;
      const other = await pacer.acquire({ priority: 'sync', deadline: performance.now() });
      t.match(other, { refused: { reason: 'rate' } }, 'a waiter that cannot wait is refused at once');
      if ('permit' in other) await other.permit.release('not_called');
    }
    await permit.release('answered');
    permit = permitOf(await next);
  }
  await permit.release('answered');
  const ok = verdicts.filter((v) => v === 'ok').length;
  const refusals = verdicts.length - ok;
  t.equal(ok, calls + 1, 'a slot for each call');
  t.ok(waits >= calls - 2, `most calls waited for their slot (${waits} of ${calls})`);
  // One refusal a wait: its waiter's first ask, before the slot's time (two more used to follow:
  // the returned slot's and the second waiter's, each a statement on the shared row).
  t.ok(refusals <= waits + 2, `${refusals} refused asks for ${waits} waits: ${JSON.stringify(verdicts)}`);
});

t.test('a caller that comes while the pace is held is told at once when calls may resume, not at its deadline', async (t) => {
  const { db } = await freshDatabase(t);
  await sql`update provider_pacing set hold_until = now() + interval '30 seconds'`.execute(db);
  let onHeld: (() => void) | undefined;
  const held = new Promise<void>((resolve) => (onHeld = resolve));
  const pacer = createPacer({ db, config, leaseMs: 60_000, log, onAsk: (verdict) => verdict === 'held' && onHeld?.() });
  t.teardown(() => pacer.close());
  // The queue's waiter is told to wait (a hold of 30 s: it asks again within a second, then again).
  const waiting = pacer.acquire({ priority: 'queue' });
  await held;
  const started = performance.now();
  const result = await pacer.acquire({ priority: 'sync', deadline: performance.now() + 5_000 });
  t.match(result, { refused: { reason: 'held' } });
  t.ok('refused' in result && result.refused.retryAfterS >= 25, `Retry-After the hold's end: ${JSON.stringify(result)}`);
  // No ask is made for it: the hold's end is known (the next ask, within a second, would tell it too).
  t.ok(performance.now() - started < 500, `answered at once (${Math.round(performance.now() - started)} ms), not at the next ask or its deadline 5 s on`);
  pacer.close();
  t.match(await waiting, { refused: { reason: 'closing' } });
});
