import { CompiledQuery, type Kysely, sql } from 'kysely';
import t from 'tap';
import { FOREIGN_KEY_CHECKS_PLANNED_ONCE } from '../../src/db/plan-guards.js';
import type { Tables } from '../../src/db/types.js';
import { ANY_QUEUED, CLAIM_NEXT, claimNextQueued, ENQUEUE_CAMPAIGN } from '../../src/submissions/queue.js';
import { freshDatabase, SERVER_URL } from '../helpers/database.js';
import { measureWork } from '../helpers/statement-cost.js';
import { plan } from '../helpers/plan.js';

// The forwarder's statements run once per forward (and the idle check twice a second per instance):
// each reads the queue's own index, whatever the size of the table or its statistics.
t.test('the queue is read through its index, with and without statistics', async (t) => {
  const { db } = await freshDatabase(t);
  await sql`
    insert into underwriting_requests (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, status, queued_at)
    select 'cust-' || g, 'h', 'm', false, case when g > 19900 then 'queued' else 'completed' end,
           case when g > 19900 then now() end
      from generate_series(1, 20000) as g`.execute(db);
  for (const state of ['never analysed', 'analysed']) {
    if (state === 'analysed') await sql`analyze underwriting_requests`.execute(db);
    for (const [name, statement] of [
      ['claim the oldest queued', CLAIM_NEXT],
      ['is anything queued', ANY_QUEUED],
    ] as const) {
      const text = await plan(db, CompiledQuery.raw(statement.text, statement === CLAIM_NEXT ? [new Date().toISOString(), 0] : []));
      t.notMatch(text, /Seq Scan on underwriting_requests/, `${name} (${state}): no sequential scan\n${text}`);
      t.match(text, /underwriting_requests_queue/, `${name} (${state}): the queue's index`);
    }
  }
});

// A campaign's batch looks each line's customer up among its requests (a file names a customer
// once): by the customer's index, one lookup per line from the campaign's first request on (not the
// customer's whole history), never every request the campaign holds so far.
t.test("a campaign's enqueue finds a line's customer by underwriting_requests_customer", async (t) => {
  const rows = ['a', 'b', 'c'];
  const parameters = [rows, rows, rows, [false, false, false], [null, null, null], ['', '', ''], [null, null, null], rows, '[null,null,null]', new Date().toISOString(), 1];
  const campaign = sql`insert into campaigns (public_id, source, created_by, created_at) values ('cmp_' || lpad('1', 32, '0'), 'ndjson', 'peer:test', now())`;
  /** 20,000 requests, a third of them the campaign's (those of other customers from 1 to `from`, none). */
  const requests = (from: number) => sql`
    insert into underwriting_requests (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, status, campaign_id)
    select 'cust-' || g, 'h', 'm', false, 'completed', case when g % 3 = 0 and g > ${from} then 1 end
      from generate_series(1, 20000) as g`;
  const check = async (db: Kysely<Tables>, state: string) => {
    const text = await db.transaction().execute(async (trx) => {
      // As a batch runs it (campaigns/upload.ts).
      await FOREIGN_KEY_CHECKS_PLANNED_ONCE.execute(trx);
      return plan(trx, CompiledQuery.raw(ENQUEUE_CAMPAIGN.text, parameters));
    });
    t.match(text, /underwriting_requests_customer/, `${state}: the customer's index\n${text}`);
    t.match(text, /Index Cond: \(\(customer_uuid = i_1\.customer_uuid\) AND \(id >= (\$\d+|\(InitPlan \d+\)\.col1)\)\)/, `${state}: from the campaign's first request on only\n${text}`);
    // The campaign's index once, for its first request (min: a Limit 1 probe), never its every entry per row.
    const campaignScans = text.split('\n').flatMap((line, i, lines) => (/underwriting_requests_campaign\b/.test(line) ? [lines[i - 1] ?? ''] : []));
    t.ok(campaignScans.every((above) => /Limit/.test(above)), `${state}: the campaign's index only as the min probe\n${text}`);
    t.notMatch(text, /Seq Scan on underwriting_requests/, `${state}: no sequential scan`);
  };

  const { db } = await freshDatabase(t);
  await campaign.execute(db);
  await requests(0).execute(db);
  for (const state of ['never analysed', 'analysed']) {
    if (state === 'analysed') await sql`analyze underwriting_requests`.execute(db);
    await check(db, state);
  }
  // The first campaign of a deployment whose requests were analysed before it (the campaign bench's
  // database): the statistics say no request has a campaign, so the campaign's index looked empty,
  // cheaper than any other, and each line read every entry the campaign had so far (5,650-10,020
  // ms per batch of 4,000 lines, 9.4M buffers, at 9,000 other requests and 20,000 lines).
  const grown = (await freshDatabase(t)).db;
  await campaign.execute(grown);
  await requests(20_000).execute(grown);
  await sql`analyze underwriting_requests`.execute(grown);
  await sql`delete from underwriting_requests`.execute(grown);
  await requests(0).execute(grown);
  await check(grown, 'analysed before any campaign, then grown');
});

// A campaign's claims: each claimed request leaves its entry in the queue's index until a vacuum
// (autovacuum on a large table comes after a fifth of it has changed), all before the first queued
// one. Walked from the start, the claim after 10,000 others steps over all of them; walked from the
// last claimed id (as the forwarder does), it reads what the first claim read. Buffers, not timings;
// PostgreSQL only (its index pages).
if (SERVER_URL) {
  t.test("a claim walks the queue from the forwarder's last claim, past the entries the claims before it left", async (t) => {
    const { db } = await freshDatabase(t);
    await sql`
      insert into underwriting_requests (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, status, queued_at, queued_body)
      select 'cust-' || g, 'h', 'm', false, 'queued', now(), '\\x00'::bytea from generate_series(1, 12000) as g`.execute(db);
    const first = await db.connection().execute((conn) => measureWork(conn, (c) => claimNextQueued(c, new Date(), 0)));
    const { rows } = await sql<{ last: string }>`
      with claimed as (
        update underwriting_requests set status = 'submitting', queued_body = null
         where id in (select id from underwriting_requests order by id limit 10000)
        returning id)
      select max(id)::text as last from claimed`.execute(db);
    const last = Number(rows[0]!.last);
    // A first walk over them marks their entries dead, as the claims that left them would have.
    t.equal((await claimNextQueued(db, new Date(), 0))?.id, last + 1, 'the whole queue walked: the oldest queued');
    const fromStart = await db.connection().execute((conn) => measureWork(conn, (c) => claimNextQueued(c, new Date(), 0)));
    const fromLast = await db.connection().execute((conn) => measureWork(conn, (c) => claimNextQueued(c, new Date(), last + 1)));
    // Room for a few pages of catalog and visibility-map reads that vary run to run (CI saw 42 against
    // 39); the walk from the start, and the bounded one without its bound, read 67-68.
    t.ok(fromLast.blocks <= first.blocks + 8, `from the last claim: ${fromLast.blocks} buffers, the first claim ${first.blocks}`);
    t.ok(fromStart.blocks >= fromLast.blocks + 20, `from the start: ${fromStart.blocks} buffers (the dead entries' pages)`);
    t.same(fromLast.seqScans, {}, 'no sequential scan');
  });
}
