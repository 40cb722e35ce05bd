import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import t, { type Test } from 'tap';
import type { DatabaseHandle } from '../../src/db/handle.js';
import { customer } from '../callbacks/fixtures.js';
import { anotherConnection, freshDatabase } from '../helpers/database.js';
import { adminGateway, call, stray } from './admin.js';
import { until } from './fixtures.js';

// A delivery that waits for its endpoint's in-flight slot (maxInFlight, shared by every instance)
// still has its whole lease ahead of it when its attempt begins: the lease is renewed then, so
// that no other instance can claim and send it while it is being sent or its outcome written.

// 3 s: the receiver answers after a database read and 250 ms; at 1 s a loaded host timed an attempt
// out, and its retry sent the event a second time.
const TIMEOUT_MS = 3000;
/** The lease: the attempt timeout + 5 s (worker.ts). */
const LEASE_MS = TIMEOUT_MS + 5000;

interface Arrival {
  id: string;
  customer: string;
  at: number;
  /** The delivery's lease end as stored when the attempt arrived (ms), or null when not leased. */
  leaseUntil: number | null;
}

/**
 * A real receiver on 127.0.0.1 answering each request after `delayMs`; on arrival it reads the
 * delivery's lease from the database (before it answers, so before the outcome is written).
 */
async function leaseWatchingReceiver(t: Test, db: DatabaseHandle['db'], delayMs: number) {
  const arrivals: Arrival[] = [];
  let endpointKey = '';
  const server = http.createServer((req, res) => {
    const at = Date.now();
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const id = String(req.headers['webhook-id']);
      const cust = JSON.parse(Buffer.concat(chunks).toString('utf8')).data.customerUuid as string;
      const lease = sql<{ lease_until: Date | null }>`
        select d.lease_until from event_deliveries d join events e on e.id = d.event_id
        where e.public_id = ${id} and d.url_key = ${endpointKey}`.execute(db);
      const answered = new Promise((resolve) => setTimeout(resolve, delayMs));
      void Promise.all([lease, answered]).then(([{ rows }]) => {
        const until = rows[0]?.lease_until;
        arrivals.push({ id, customer: cust, at, leaseUntil: until ? new Date(until).getTime() : null });
        res.end();
      });
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/lease`,
    arrivals,
    watch: (key: string) => (endpointKey = key),
  };
}

t.test('maxInFlight 1, a slow receiver and two instances: every attempt has its lease ahead of it, every event arrives once', async (t) => {
  const database = await freshDatabase(t);
  const receiver = await leaseWatchingReceiver(t, database.db, 250);
  const env = { EVENT_WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS) };
  const { app: a } = await adminGateway(t, database, env);
  const { app: b } = await adminGateway(t, await anotherConnection(t, database), env);
  const created = await call(a, 'POST', '/v1/endpoints', { url: receiver.url, maxInFlight: 1, types: ['callback.unmatched'] });
  const id = created.body.id as string;
  // An API endpoint's key (what its deliveries name it by) is its id.
  receiver.watch(id);
  // Paused through both instances' routes: a change made through an instance's route refreshes that
  // instance's endpoints before it answers, while b's worker would see a's change only at its next
  // read (every 0.5 s) and could send what b records meanwhile. (b's GET reads the database, not them.)
  for (const app of [a, b]) t.equal((await call(app, 'PATCH', `/v1/endpoints/${id}`, { status: 'paused' })).status, 200);
  // 40 events recorded while it is paused, half on each instance; resumed, one instance leases them
  // all in one dispatch, and at 250 ms each, one at a time, the last wait longer than a lease (8 s).
  const custs = Array.from({ length: 40 }, (_, i) => customer(`lease-${i}`));
  await Promise.all(custs.map((c, i) => stray(i % 2 === 0 ? a : b, c)));
  const resumedAt = Date.now();
  await call(a, 'PATCH', `/v1/endpoints/${id}`, { status: 'active' });
  await until(() => custs.every((c) => receiver.arrivals.some((r) => r.customer === c)), 60_000, 'every event at the receiver');
  // Whatever is still queued somewhere would arrive within another lease.
  await until(async () => {
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from event_deliveries where url_key = ${id} and status <> 'delivered'`.execute(database.db);
    return rows[0]!.n === 0 ? true : undefined;
  }, 10_000, 'every delivery recorded delivered');

  const lastAt = Math.max(...receiver.arrivals.map((r) => r.at));
  t.ok(lastAt - resumedAt > LEASE_MS, `the queue outlasted a lease: the last event arrived ${lastAt - resumedAt} ms after the resume`);
  const times = new Map<string, number>();
  for (const r of receiver.arrivals) times.set(r.id, (times.get(r.id) ?? 0) + 1);
  t.same([...times.entries()].filter(([, n]) => n !== 1), [], 'no event sent twice');
  t.equal(times.size, custs.length, 'every event sent');
  // Each attempt arrived with its timeout and most of the 5 s margin for writing its outcome still
  // ahead of its lease (1 s of slack for the renewal and the request on a loaded host).
  const short = receiver.arrivals
    .filter((r) => r.leaseUntil === null || r.leaseUntil - r.at < TIMEOUT_MS + 3000)
    .map((r) => `${r.customer}: ${r.leaseUntil === null ? 'not leased' : `${r.leaseUntil - r.at} ms of lease left`}`);
  t.same(short, [], 'every attempt had at least its timeout + 3 s of lease left when it arrived');
});
