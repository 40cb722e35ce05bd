import { sql } from 'kysely';
import t from 'tap';
import { reserveRateSlots, recordEndpointFailing } from '../../src/events/endpoint-limits-sql.js';
import { insertEndpoint } from '../../src/events/endpoints/sql.js';
import { recordEventsSql } from '../../src/events/record.js';
import { redeliverDeliveries } from '../../src/events/redelivery-sql.js';
import { SERVER_URL, anotherConnection, freshDatabase } from '../helpers/database.js';

// A redelivery keeps the endpoints it queues for from being deleted while it runs; it must not hold
// back the writes every delivery worker makes to endpoint rows meanwhile (a rate-limited endpoint's
// slots, its health): those need the row kept, not unchanged. Two connections at once: PostgreSQL only
// (PGlite has one), as test/events/durability.test.ts.
if (SERVER_URL) {
  t.test('a redelivery under way does not hold back the rate slots or health writes of the endpoints it names', async (t) => {
    const database = await freshDatabase(t);
    const other = await anotherConnection(t, database);
    const now = new Date();
    await database.db.transaction().execute((tx) =>
      insertEndpoint(tx, { id: 'ep_lock', key: 'ep_lock', managed: 'api', url: 'http://127.0.0.1:9/lock', shownUrl: 'http://127.0.0.1:9/lock', description: '', types: null, rateLimitPerS: 5, maxInFlight: null, secret: 'whsec_x' } as never, now),
    );
    await sql`
      with source as (
        select 'callback.unmatched' as type, 'lock-cust' as customer_uuid, now() as created_at,
               null::bigint as request_id, null::bigint as callback_id, jsonb_build_object('customerUuid', 'lock-cust') as data
      ),
      ${sql.raw(recordEventsSql('source'))}
      select 1`.execute(database.db);
    await sql`insert into event_deliveries (event_id, customer_uuid, url_key, url, status, queued_at, next_attempt_at, last_error)
      select id, customer_uuid, 'ep_lock', 'http://127.0.0.1:9/lock', 'dead', now(), now(), 'x' from events`.execute(database.db);

    await database.db.transaction().execute(async (trx) => {
      t.equal(await redeliverDeliveries(trx, { status: 'dead' }, [{ key: 'ep_lock', types: null }], now), 1, 'queued again (its transaction still open)');
      const blocked = async (what: string, run: (db: typeof other.db) => Promise<unknown>) => {
        const error = await other.db
          .transaction()
          .execute(async (o) => {
            await sql`set local lock_timeout = '1s'`.execute(o);
            await run(o);
          })
          .then(() => undefined, (err: Error) => err.message);
        t.equal(error, undefined, `${what} is not held back by the redelivery`);
      };
      await blocked('a rate slot reservation (every attempt to a rate-limited endpoint)', (o) => reserveRateSlots(o, 'ep_lock', Math.floor(Date.now() / 1000), 1, 5));
      await blocked('a health write', (o) => recordEndpointFailing(o, 'ep_lock', new Date()));
      // What the lock is for: a delete waits for the redelivery (and then ends dead what it queued).
      const deleted = await other.db
        .transaction()
        .execute(async (o) => {
          await sql`set local lock_timeout = '500ms'`.execute(o);
          await sql`delete from event_endpoints where key = 'ep_lock'`.execute(o);
        })
        .then(() => 'deleted', (err: Error) => err.message);
      t.match(deleted, /lock timeout/, 'a delete of the endpoint still waits for the redelivery');
    });
  });
}
