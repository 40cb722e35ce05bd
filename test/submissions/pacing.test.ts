import { sql } from 'kysely';
import t, { type Test } from 'tap';
import { buildTestApp } from '../helpers/app.js';
import { freshDatabase } from '../helpers/database.js';
import { ensureSlots, returnSlot, takeSlots } from '../../src/provider/sql.js';
import { parseScrape, sampleValue } from '../helpers/metrics.js';
import { until } from '../helpers/until.js';
import { validRequest } from './fixtures.js';
import { requestOf, submitAsync } from './pacing-fixtures.js';
import { startFakeProvider } from './provider.js';

// Two gateway instances on one database pace their calls to the provider together.

const submitSync = (app: Awaited<ReturnType<typeof buildTestApp>>['app'], customerUuid: string) =>
  app.inject({ method: 'POST', url: '/v1/underwritings', headers: { 'content-type': 'application/json' }, payload: JSON.stringify(validRequest({ customerUuid })) });

/** A fake provider: answers as `answer` says, records arrival times and how many calls overlapped at most. */
async function scriptedProvider(t: Test) {
  const state = { answer: 'accept' as 'hold' | 'fail' | 'accept', arrivals: [] as number[], active: 0, maxActive: 0 };
  const provider = await startFakeProvider(t, (_received, res) => {
    state.arrivals.push(Date.now());
    state.active++;
    state.maxActive = Math.max(state.maxActive, state.active);
    const end = (status: number, headers: Record<string, string> = {}) => {
      state.active--;
      res.writeHead(status, { 'content-type': 'application/json', ...headers }).end('{}');
    };
    if (state.answer === 'hold') {
      state.answer = 'accept';
      return end(429, { 'retry-after': '2' });
    }
    if (state.answer === 'fail') return end(500);
    // Slow enough that a second probe, were one allowed, would overlap the first.
    setTimeout(() => end(202), 200);
  });
  return { provider, state };
}

t.test("the provider's Retry-After holds both instances", async (t) => {
  const database = await freshDatabase(t);
  const { provider, state } = await scriptedProvider(t);
  state.answer = 'hold';
  // One call at a time: the 429's hold is recorded before any other call may start.
  const env = { PROVIDER_BASE_URL: provider.url, PROVIDER_MAX_IN_FLIGHT: '1' };
  const a = await buildTestApp(t, { database, env });
  const b = await buildTestApp(t, { database, env });
  for (const [i, app] of [a.app, b.app, a.app, b.app].entries()) t.equal((await submitAsync(app, `held-${i}`)).statusCode, 202);
  await until(async () => {
    const rows = await Promise.all([0, 1, 2, 3].map((i) => requestOf(database, `held-${i}`)));
    return rows.every((r) => r?.status === 'submitted');
  });
  const { arrivals } = state;
  t.equal(arrivals.length, 5, 'four customers, one of them twice (its 429 was not a receipt)');
  t.ok(arrivals[1]! - arrivals[0]! >= 1900, `no call for 2 s after the 429 (the next came after ${arrivals[1]! - arrivals[0]!} ms)`);
});

t.test('a circuit opened by consecutive failures stops both instances, and one probe closes it', async (t) => {
  const database = await freshDatabase(t);
  const { provider, state } = await scriptedProvider(t);
  const { arrivals } = state;
  // Open longer than a synchronous submit's send window (5 s): a submit meanwhile is refused, not kept waiting.
  const env = { PROVIDER_BASE_URL: provider.url, PROVIDER_CIRCUIT_FAILURES: '3', PROVIDER_CIRCUIT_OPEN_S: '60' };
  const a = await buildTestApp(t, { database, env });
  const b = await buildTestApp(t, { database, env });
  // A third instance that calls nobody: its /metrics shows the shared circuit all the same.
  const idle = await buildTestApp(t, { database, env });
  const scrapeIdle = async () => parseScrape((await idle.app.inject({ url: '/metrics' })).body);
  // Calls in flight anywhere (two slots leased as another instance would) and a Retry-After's hold.
  await ensureSlots(database.db, 10);
  const leased: number[] = [];
  while (leased.length < 2) {
    // One at a time: the spread may allow one slot in a take, and refuses ('rate') until the time it names.
    const taken = await takeSlots(database.db, { maxRps: 1000, maxInFlight: 10, circuitFailures: 3 }, 'elsewhere', 60_000, 1);
    if (taken.slots) leased.push(...taken.slots);
    else if (taken.refusal !== 'rate' || taken.untilMs === null) throw new Error(`slot refused: ${taken.refusal}`);
    else await new Promise((resolve) => setTimeout(resolve, Math.max(1, taken.untilMs! - taken.nowMs)));
  }
  await sql`update provider_pacing set hold_until = clock_timestamp() + interval '30 seconds'`.execute(database.db);
  const busy = await scrapeIdle();
  t.equal(sampleValue(busy, 'underwriting_provider_calls_in_flight'), 2);
  const held = sampleValue(busy, 'underwriting_provider_hold_seconds');
  t.ok(held > 20 && held <= 30, `held ${held} s`);
  for (const slot of leased) await returnSlot(database.db, { slot, holder: 'elsewhere', outcome: 'not_called', probe: false, holdS: null, circuitFailures: 3, circuitOpenS: 60 });
  await sql`update provider_pacing set hold_until = '-infinity'`.execute(database.db);
  const free = await scrapeIdle();
  t.equal(sampleValue(free, 'underwriting_provider_calls_in_flight'), 0);
  t.equal(sampleValue(free, 'underwriting_provider_hold_seconds'), 0, "nothing held (hold_until '-infinity', as on a new database)");
  t.equal(sampleValue(free, 'underwriting_provider_circuit_open'), 0, 'the circuit closed to begin with');

  // The circuit: three failures in a row open it for both instances.
  state.answer = 'fail';
  for (const [i, app] of [a.app, b.app, a.app].entries()) t.equal((await submitSync(app, `failing-${i}`)).statusCode, 502);
  const open = await scrapeIdle();
  t.equal(sampleValue(open, 'underwriting_provider_circuit_open'), 1, 'open, on the instance that made no call');
  t.equal(sampleValue(open, 'provider_circuit_open'), 0, 'its own view (what it saw itself) stays closed');
  const before = arrivals.length;
  for (const app of [a.app, b.app]) {
    const refused = await submitSync(app, `while-open-${app === a.app ? 'a' : 'b'}`);
    t.equal(refused.statusCode, 504, 'not called while the circuit is open');
    t.equal(refused.json().error, 'upstream_unavailable');
    t.ok(Number(refused.headers['retry-after']) >= 1, 'with Retry-After');
  }
  t.equal(arrivals.length, before, 'the provider was not called');
  t.match(await requestOf(database, 'while-open-a'), { status: 'submit_failed', upstream_error: /^not sent: / });

  // The provider recovers; after the open period one instance probes, and both call again once it succeeds.
  state.answer = 'accept';
  state.maxActive = 0;
  // The open period over, as if its minute had passed.
  await sql`update provider_pacing set open_until = clock_timestamp()`.execute(database.db);
  const probed = await Promise.all([submitSync(a.app, 'probe-a'), submitSync(b.app, 'probe-b')]);
  t.same(probed.map((r) => r.statusCode), [202, 202]);
  t.equal(state.maxActive, 1, 'one probe at a time: the second call waited for the first to close the circuit');
  t.equal(sampleValue(await scrapeIdle(), 'underwriting_provider_circuit_open'), 0, 'closed again, on every instance');
});
