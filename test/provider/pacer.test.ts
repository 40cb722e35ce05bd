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
