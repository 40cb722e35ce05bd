import { sql } from 'kysely';
import t from 'tap';
import { INDEX_SCANS_ONLY } from '../../src/db/plan-guards.js';
import { endpointStatsQuery, insertEndpoint } from '../../src/events/endpoints/sql.js';
import { redeliverQuery } from '../../src/events/redelivery-sql.js';
import { presentQuery } from '../../src/stats/sql.js';
import { freshDatabase } from '../helpers/database.js';
import { plan } from '../helpers/plan.js';

// The planner is PostgreSQL's on both engines (PGlite is PostgreSQL compiled to WASM).
t.test("GET /v1/endpoints and the scrape count an endpoint's deliveries through event_deliveries_endpoint, never scanning every delivery", async (t) => {
  const { db } = await freshDatabase(t);
  // 30,000 deliveries over 20 endpoints, mostly delivered, some pending (failed or not) and dead.
  await sql`
    with e as (
      insert into events (public_id, type, customer_uuid, created_at, data)
      select 'evt_' || g, 'callback.unmatched', 'cust-' || (g % 500), timestamptz '2026-01-01' + g * interval '1 second', '{}'::jsonb
        from generate_series(1, 1500) as g
      returning id, customer_uuid, created_at
    )
    insert into event_deliveries (event_id, customer_uuid, url_key, url, queued_at, next_attempt_at, status, attempts, last_attempt_at, last_status)
    select e.id, e.customer_uuid, 'key-' || k, 'http://127.0.0.1/' || k, e.created_at, e.created_at,
           case when e.id % 50 = 0 then 'dead' when e.id % 40 = 0 then 'pending' else 'delivered' end,
           case when e.id % 80 = 0 then 0 else 1 end,
           case when e.id % 80 = 0 then null else e.created_at end, 200
      from e cross join generate_series(1, 20) as k`.execute(db);
  await sql`analyze event_deliveries`.execute(db);
  for (const keys of [['key-3'], Array.from({ length: 20 }, (_, i) => `key-${i + 1}`)]) {
    const text = await plan(db, endpointStatsQuery(keys).compile(db));
    t.notMatch(text, /Seq Scan on event_deliveries/, `${keys.length} endpoint(s): no sequential scan\n${text}`);
    t.notMatch(text, /HashAggregate|GroupAggregate/, 'no grouping of every delivery');
    t.match(text, /(Index (Only )?Scan (Backward )?using|Bitmap Index Scan on) event_deliveries_endpoint/, 'the endpoint index');
  }
  const latest = await plan(db, endpointStatsQuery(['key-3']).compile(db));
  t.match(latest, /Index Scan Backward using event_deliveries_endpoint/, 'the latest attempt by a backward walk, stopped at one row');
  // And the figures are right.
  const { rows } = await endpointStatsQuery(['key-3', 'key-none']).execute(db);
  const byKey = new Map(rows.map((r) => [r.url_key, r]));
  const expected = await sql<{ delivered: number; failed: number; dead: number; last: Date }>`
    select count(*) filter (where status = 'delivered')::int as delivered,
           count(*) filter (where status = 'pending' and attempts > 0)::int as failed,
           count(*) filter (where status = 'dead')::int as dead, max(last_attempt_at) as last
      from event_deliveries where url_key = 'key-3'`.execute(db);
  t.match(byKey.get('key-3'), { delivered: expected.rows[0]!.delivered, failed: expected.rows[0]!.failed, dead: expected.rows[0]!.dead, last_status: 200 });
  t.equal(new Date(byKey.get('key-3')!.last_attempt_at!).getTime(), new Date(expected.rows[0]!.last).getTime());
  t.match(byKey.get('key-none'), { delivered: 0, failed: 0, dead: 0, last_attempt_at: null, last_status: null });

  // A bulk redelivery to one endpoint reads its deliveries by an index, never every delivery.
  for (const status of ['dead', 'delivered'] as const) {
    const text = await plan(db, redeliverQuery({ status }, [{ key: 'key-3', types: null }], new Date('2027-01-01')).compile(db));
    t.notMatch(text, /Seq Scan on event_deliveries/, `redeliver ${status} to one endpoint: no sequential scan\n${text}`);
    t.match(text, /(Index (Only )?Scan using|Bitmap Index Scan on) event_deliveries_\w+/, `redeliver ${status}: by index`);
  }

  // The scrape's dead deliveries of stored endpoints (underwriting_event_deliveries_dead{endpoint="exists"}):
  // each endpoint's through event_deliveries_endpoint, never every dead delivery once per endpoint.
  await db.transaction().execute(async (tx) => {
    for (let k = 1; k <= 15; k++) {
      const e = { id: `ep_plan${k}`, key: `key-${k}`, url: `http://127.0.0.1/${k}`, shownUrl: `http://127.0.0.1/${k}` };
      await insertEndpoint(tx, { ...e, managed: 'api', description: '', types: null, rateLimitPerS: null, maxInFlight: null, secret: 'whsec_x' }, new Date());
    }
  });
  await sql`analyze event_endpoints`.execute(db);
  const present = await db.transaction().execute(async (trx) => {
    await INDEX_SCANS_ONLY.execute(trx);
    return plan(trx, presentQuery(new Date('2026-01-01')).compile(db));
  });
  t.match(present, /Index Only Scan using event_deliveries_endpoint on event_deliveries \w+ .*\n\s+Index Cond: \(\(url_key = ep\.key\) AND \(status = 'dead'::text\)\)/, `the present: the dead of each endpoint by its own entries\n${present}`);
  const kept = (await presentQuery(new Date('2026-01-01')).execute(db)).rows[0]!;
  const dead = await sql<{ n: number }>`select count(*)::int as n from event_deliveries where status = 'dead' and url_key in (select key from event_endpoints)`.execute(db);
  t.equal(Number(kept.deliveries_dead_kept), dead.rows[0]!.n, 'the dead deliveries of the 15 endpoints stored, not of the 5 others');
  t.ok(Number(kept.deliveries_dead) > Number(kept.deliveries_dead_kept));
});
