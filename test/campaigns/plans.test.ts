import { CompiledQuery, sql } from 'kysely';
import t from 'tap';
import { CANCEL_QUEUED, COUNT_CAMPAIGN, listQuery, RESULTS_PAGE } from '../../src/campaigns/sql.js';
import { freshDatabase } from '../helpers/database.js';
import { plan } from '../helpers/plan.js';
import { INDEX_LOOKUPS_ONLY } from '../../src/db/plan-guards.js';

// A campaign's statements read its own requests through the partial indexes of migration 0018,
// never the whole table: 30k requests outside campaigns, three campaigns of ~1.7k among them.
t.test("a campaign's counts, results, cancel and the list use their indexes", async (t) => {
  const { db } = await freshDatabase(t);
  await sql`
    insert into campaigns (public_id, source, created_by, created_at)
    select 'cmp_' || lpad(g::text, 32, '0'), 'ndjson', 'peer:test', timestamptz '2026-01-01' + g * interval '1 hour'
      from generate_series(1, 300) as g`.execute(db);
  await sql`
    insert into underwriting_requests (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, status, decision, submitted_at, campaign_id)
    select 'cust-' || g, 'h', 'm', false,
           case when g % 5 = 0 then 'queued' when g % 5 = 1 then 'submitted' else 'completed' end,
           case when g % 5 > 1 then 'approved' end,
           timestamptz '2026-01-01' + g * interval '1 second',
           -- Campaign rows spread among single submits (uploads and submits interleave), 1 in 7.
           case when g % 7 = 0 then 1 + (g / 7) % 3 end
      from generate_series(1, 35000) as g`.execute(db);
  await sql`analyze underwriting_requests`.execute(db);
  await sql`analyze campaigns`.execute(db);

  const statements: Array<[string, CompiledQuery, RegExp]> = [
    ['counts', CompiledQuery.raw(COUNT_CAMPAIGN.text, [2, '2026-01-01T05:00:00Z']), /underwriting_requests_campaign\b/],
    ['results page', CompiledQuery.raw(RESULTS_PAGE.text, [2, 25000, 1000]), /underwriting_requests_campaign\b/],
    // The queue's index holds only queued requests: walking it is bounded by the queue, as the campaign's own.
    ['cancel', CompiledQuery.raw(CANCEL_QUEUED.text, [2, '2026-02-01T00:00:00Z', 5000]), /underwriting_requests_(campaign_open|campaign|queue)\b/],
    ['list', listQuery(undefined, 20).compile(db), /campaigns_list/],
    ['list, next page', listQuery({ t: '2026-01-05T00:00:00.000000Z', id: 100 }, 20).compile(db), /campaigns_list/],
  ];
  for (const [name, query, index] of statements) {
    // The list runs with sequential scans off (sql.ts: listCampaigns), as here.
    const text = name.startsWith('list') ? await db.transaction().execute(async (trx) => (await INDEX_LOOKUPS_ONLY.execute(trx), plan(trx, query))) : await plan(db, query);
    t.notMatch(text, /Seq Scan on underwriting_requests/, `${name}: no sequential scan of the requests\n${text}`);
    t.match(text, index, `${name}: ${index}\n${text}`);
  }
  const listPlan = await db.transaction().execute(async (trx) => (await INDEX_LOOKUPS_ONLY.execute(trx), plan(trx, listQuery(undefined, 20).compile(db))));
  t.match(listPlan, /underwriting_requests_campaign_open/, "the list's in-flight probe uses the small index");
});
