import t, { type Test } from 'tap';
import { sql } from 'kysely';
import type { EndpointTarget } from '../../src/events/endpoints/registry.js';
import { type EndpointPacerDeps, endpointPacer } from '../../src/events/pacer.js';
import type { Sendable } from '../../src/events/sendable.js';
import { freshDatabase } from '../helpers/database.js';
import { until } from '../helpers/until.js';

// The pacer alone, on a real database (its rate slots are reserved in the endpoint's row), with a
// clock the test moves: what a second's rate slots may be used for.

const database = await freshDatabase(t);

/** An API-made endpoint with a rate limit, its row in the database (its rate slots are reserved there), and its target. */
async function rateLimitedEndpoint(key: string, rateLimitPerS: number): Promise<EndpointTarget> {
  const id = `ep_${key.replaceAll('-', '_')}`;
  await sql`insert into event_endpoints (id, key, managed, url, shown_url, rate_limit_per_s, created_at, updated_at)
            values (${id}, ${key}, 'api', 'http://127.0.0.1:9/', 'http://127.0.0.1:9/', ${rateLimitPerS}, now(), now())`.execute(database.db);
  return { key, id, status: 'active', rateLimitPerS, maxInFlight: null, failingSince: null } as unknown as EndpointTarget;
}

/** The pacer of one worker sending to that endpoint alone, on the test's clock. */
function pacerFor(t: Test, target: EndpointTarget, deps: Pick<EndpointPacerDeps, 'db' | 'clock' | 'attempt'>) {
  return endpointPacer({
    ...deps,
    concurrency: 64,
    active: () => [target],
    targetOf: () => target,
    pollMs: 1000,
    slotsTtlS: 10,
    stopped: () => false,
    warn: (err) => t.fail(String(err)),
    wake: () => {},
  });
}

const deliveryTo =
  (key: string) =>
  (n: number): Sendable => ({
    id: n, urlKey: key, customer: `c${n}`, claimed: false, token: 'tok', publicId: `evt_${n}`, body: '{}',
    createdAt: new Date(0), queuedAt: new Date(0), attempts: 0, traceparent: null, requestId: null, leaseEndsAt: Number.MAX_SAFE_INTEGER,
  });

t.test("a second's rate slots are never used in the next second: a reservation that ends after its second has passed is spent", async (t) => {
  const target = await rateLimitedEndpoint('pacer-rate', 5);
  // 0.99 s into second 10,000 when the first reservation is asked for, and 0.01 s into second
  // 10,001 by the time the database has answered it (the clock moves as the statement is sent).
  let nowMs = 10_000_990;
  const sentAt: number[] = [];
  const slowDatabase = database.db.withPlugin({
    transformQuery: (args) => {
      if (nowMs === 10_000_990) nowMs = 10_001_010;
      return args.node;
    },
    transformResult: async (args) => args.result,
  });
  const pacer = pacerFor(t, target, {
    db: slowDatabase,
    clock: () => new Date(nowMs),
    attempt: async () => {
      sentAt.push(nowMs);
    },
  });
  const delivery = deliveryTo(target.key);
  for (let n = 1; n <= 10; n++) pacer.route(delivery(n));
  await until(() => sentAt.length >= 5, 10_000, 'the first five sends');
  // The second 10,001's five go; none of second 10,000's on top of them.
  nowMs = 10_001_500;
  const bySecond = () => {
    const counts = new Map<number, number>();
    for (const at of sentAt) counts.set(Math.floor(at / 1000), (counts.get(Math.floor(at / 1000)) ?? 0) + 1);
    return counts;
  };
  t.same([...bySecond().entries()], [[10_001, 5]], `sends by second: ${JSON.stringify([...bySecond().entries()])}`);
  // The rest in the seconds after, five a second at most.
  nowMs = 10_002_100;
  await until(() => sentAt.length >= 10, 10_000, 'the other five sends');
  t.same([...bySecond().entries()], [[10_001, 5], [10_002, 5]]);
  pacer.takeWaiting();
  await pacer.release();
});

t.test("deliveries whose rate slots were spent go out in the next second in the order they were first sent, whatever order their attempts ended in", async (t) => {
  for (const [name, endings] of [['ended as sent', [1, 2, 3]], ['ended out of order', [2, 3, 1]]] as const) {
    const target = await rateLimitedEndpoint(`pacer-spent-${endings.join('')}`, 3);
    let nowMs = 20_000_100;
    const sent: number[] = [];
    const spent = new Map<number, (result: 'again') => void>();
    const pacer = pacerFor(t, target, {
      db: database.db,
      clock: () => new Date(nowMs),
      attempt: (delivery) => {
        sent.push(delivery.id);
        // The first second's three: their slots spent (the worker's renewal outlasted the second).
        if (sent.length <= 3) return new Promise<'again'>((resolve) => spent.set(delivery.id, resolve));
        return Promise.resolve();
      },
    });
    const delivery = deliveryTo(target.key);
    for (let n = 1; n <= 5; n++) pacer.route(delivery(n));
    await until(() => spent.size === 3, 10_000, 'the first second’s three sends');
    t.same(sent, [1, 2, 3], `${name}: the first second`);
    for (const id of endings) {
      spent.get(id)!('again');
      // Its attempt's end handled (routed back) before the next one ends.
      await new Promise((resolve) => setImmediate(resolve));
    }
    nowMs = 20_001_100;
    await until(() => sent.length >= 6, 10_000, 'the next second’s three sends');
    t.same(sent.slice(3, 6), [1, 2, 3], `${name}: the next second sends the spent three first, in the order they were first sent`);
    nowMs = 20_002_100;
    await until(() => sent.length >= 8, 10_000, 'the last two');
    t.same(sent.slice(6), [4, 5], `${name}: then the rest`);
    pacer.takeWaiting();
    await pacer.release();
  }
});
