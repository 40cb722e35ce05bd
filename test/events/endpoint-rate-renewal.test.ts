import pg from 'pg';
import t from 'tap';
import { customer } from '../callbacks/fixtures.js';
import { freshDatabase, SERVER_URL } from '../helpers/database.js';
import { adminGateway, call, stray } from './admin.js';
import { until } from '../helpers/until.js';
import { startReceiver } from './receiver.js';

// rateLimitPerS is a count of attempts per second as the receiver gets them: an attempt is signed
// (webhook-timestamp) and sent in the second its rate slot was taken for, never in a later one on
// top of that second's own. A delivery that waited for its slot has its lease renewed first (a
// write); when the database is slow, that write can end after the second is over. The slot is
// then spent, and the delivery waits for another. PostgreSQL only: the slow write is made by
// holding the deliveries' rows in another session, which PGlite (one session) cannot do.

if (SERVER_URL) {
  t.test("a lease renewed past its rate slot's second: the slot is spent, never used in a later second beside that second's own", async (t) => {
    const database = await freshDatabase(t);
    const receiver = await startReceiver(t);
    const { app } = await adminGateway(t, database);
    const created = await call(app, 'POST', '/v1/endpoints', { url: receiver.url, rateLimitPerS: 1, types: ['callback.unmatched'] });
    const id = created.body.id as string;
    t.teardown(() => call(app, 'DELETE', `/v1/endpoints/${id}`));
    // Four events recorded while it is paused; resumed, one dispatch leases them all, and at one a
    // second the third and fourth wait over a second for their slots: their leases are renewed first.
    t.equal((await call(app, 'PATCH', `/v1/endpoints/${id}`, { status: 'paused' })).status, 200);
    const custs = Array.from({ length: 4 }, (_, i) => customer(`rate-renew-${i}`));
    for (const c of custs) await stray(app, c);
    const holder = new pg.Client({ connectionString: database.url });
    await holder.connect();
    t.teardown(() => holder.end());
    t.equal((await call(app, 'PATCH', `/v1/endpoints/${id}`, { status: 'active' })).status, 200);
    const [first] = await receiver.count(1);
    // Once the first has arrived, every other pending delivery's row is held by another session until half
    // past the third second after the one it was signed in: the renewals of the slots of the two
    // seconds before that one wait for it, and end in that second.
    const firstSecond = Number(first!.headers['webhook-timestamp']);
    await holder.query('begin');
    const held = await holder.query(
      `select d.id from event_deliveries d join events e on e.id = d.event_id
        where d.url_key = $1 and d.status = 'pending' and e.public_id <> $2 for update of d`,
      [id, first!.headers['webhook-id']],
    );
    // The second's may be delivered already (sent at the next second's start, no renewal): the
    // third's and fourth's wait over a second for their slots, so they are renewed, and held here.
    t.ok((held.rowCount ?? 0) >= 2, `the deliveries not yet delivered held (${held.rowCount})`);
    const releaseAt = (firstSecond + 3) * 1000 + 500;
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, releaseAt - Date.now())));
    await holder.query('commit');

    const got = await receiver.waitFor(() => custs.every((c) => receiver.received.some((r) => r.json.data.customerUuid === c)), 20_000, 'all four events');
    const signed = got.filter((r) => custs.includes(r.json.data.customerUuid)).map((r) => Number(r.headers['webhook-timestamp']));
    const bySecond = new Map<number, number>();
    for (const second of signed) bySecond.set(second, (bySecond.get(second) ?? 0) + 1);
    t.equal(signed.length, 4, 'each event sent once');
    t.ok(Math.max(...bySecond.values()) <= 1, `at most one attempt signed in any second at rateLimitPerS 1: ${JSON.stringify(signed.map((s) => s - firstSecond))} (seconds after the first)`);
    // Delivered in the end, every one (none left pending by a spent slot).
    await until(async () => {
      const { rows } = await holder.query<{ n: number }>(`select count(*)::int as n from event_deliveries where url_key = $1 and status <> 'delivered'`, [id]);
      return rows[0]!.n === 0 ? true : undefined;
    }, 10_000, 'every delivery recorded delivered');
  });
}
