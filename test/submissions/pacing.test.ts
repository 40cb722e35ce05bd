import { sql } from 'kysely';
import t, { type Test } from 'tap';
import { buildTestApp } from '../helpers/app.js';
import { freshDatabase } from '../helpers/database.js';
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

  // The circuit: three failures in a row open it for both instances.
  state.answer = 'fail';
  for (const [i, app] of [a.app, b.app, a.app].entries()) t.equal((await submitSync(app, `failing-${i}`)).statusCode, 502);
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
});
