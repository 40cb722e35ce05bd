import { type Kysely, sql } from 'kysely';
import type { Tables } from '../db/types.js';

// Data shaped like a gateway in service, for the statistics plans: the test's small copy and the
// 1M-row check in bench/investigations/stats-plans.ts use the same SQL.

export interface StatsData {
  /** Live requests, spread evenly over `days` days ending at `end`. */
  requests: number;
  days: number;
  end: Date;
  /** Days before those, already purged: one aggregate row per hour, ~20 turnaround bins each. */
  purgedDays: number;
}

export async function seedStatsData(db: Kysely<Tables>, d: StatsData): Promise<void> {
  const stepS = (d.days * 86_400) / d.requests;
  const customers = Math.max(1, Math.floor(d.requests / 3));
  // 85% completed (decisions in turn, turnaround 1-120 s), 8% expired, 7% failed; the newest 0.05%
  // still waiting (one per customer, as the one-in-flight index demands).
  await sql`
    insert into underwriting_requests
      (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, srd, status, decision, upstream_status,
       submitted_at, updated_at, completed_at)
    select 'cust-' || (g % ${sql.lit(customers)}), 'hash-' || (g % ${sql.lit(Math.max(1, Math.floor(d.requests / 2)))}), '***.456.789-**', false,
           '{"grossIncome": 8000, "occupation": "Retired"}'::jsonb,
           s.status,
           case when s.status = 'completed' then (array['approved','declined','no_score','filtered'])[1 + g % 4] end,
           202, s.at,
           case when s.status = 'completed' then s.at + s.turnaround else s.at end,
           case when s.status = 'completed' then s.at + s.turnaround end
      from generate_series(1, ${sql.lit(d.requests)}) as g
      cross join lateral (
        select ${d.end}::timestamptz - (${sql.lit(d.requests)} - g) * ${sql.lit(stepS)} * interval '1 second' as at,
               case when g > ${sql.lit(d.requests)} - ${sql.lit(Math.max(1, Math.floor(d.requests / 2000)))} then 'submitted'
                    when g % 100 < 85 then 'completed'
                    when g % 100 < 93 then 'expired'
                    else 'submit_failed' end as status,
               (1000 + (g::bigint * 7919) % 119000) * interval '1 millisecond' as turnaround
      ) s`.execute(db);
  // Each completed request's matched callback.
  await sql`
    insert into callbacks (received_at, peer, raw_body, outcome, customer_uuid, started, finished, body, decision, request_id)
    select r.completed_at, '10.0.0.1', convert_to('{"customerUuid":"' || r.customer_uuid || '","serviceType":"CREDIT_SCORE"}', 'UTF8'),
           'matched', r.customer_uuid, r.submitted_at, r.completed_at, '{"serviceType":"CREDIT_SCORE"}'::jsonb, r.decision, r.id
      from underwriting_requests r where r.status = 'completed'`.execute(db);
  await sql`update underwriting_requests r set result_callback_id = c.id from callbacks c where c.request_id = r.id`.execute(db);
  // 2% as many unmatched callbacks, 0.5% invalid ones, over the same span.
  const strays = Math.max(1, Math.floor(d.requests / 40));
  await sql`
    insert into callbacks (received_at, peer, raw_body, outcome, error, customer_uuid, started, finished)
    select ${d.end}::timestamptz - (${sql.lit(strays)} - g) * ${sql.lit((d.days * 86_400) / strays)} * interval '1 second', '10.0.0.1',
           convert_to('{"customerUuid":"stray-' || g || '","cpf":"52998224725"}', 'UTF8'),
           case when g % 5 = 0 then 'invalid' else 'unmatched' end,
           case when g % 5 = 0 then 'response: required' end,
           'stray-' || g,
           case when g % 5 <> 0 then ${d.end}::timestamptz - g * interval '1 second' end,
           case when g % 5 <> 0 then ${d.end}::timestamptz - g * interval '1 second' end
      from generate_series(1, ${sql.lit(strays)}) as g`.execute(db);
  // Outcome events of the answered requests, each pushed to one URL: nearly all delivered, the
  // newest few still pending, one in 1,000 dead.
  await sql`
    insert into events (public_id, type, customer_uuid, created_at, request_id, data)
    select 'evt_' || lpad(r.id::text, 32, '0'), 'underwriting.completed', r.customer_uuid, r.updated_at, r.id, '{}'::jsonb
      from underwriting_requests r where r.status = 'completed'`.execute(db);
  await sql`
    insert into event_deliveries (event_id, customer_uuid, url_key, url, status, attempts, queued_at, next_attempt_at)
    select e.id, e.customer_uuid, 'k', 'https://hooks.example/', 
           case when e.id % 1000 = 0 then 'dead' when e.created_at > ${d.end}::timestamptz - interval '1 minute' then 'pending' else 'delivered' end,
           1, e.created_at, e.created_at
      from events e`.execute(db);
  if (d.purgedDays > 0) {
    const firstHour = new Date(d.end.getTime() - (d.days + d.purgedDays) * 86_400_000);
    const hours = d.purgedDays * 24;
    await sql`
      insert into statistics_hourly (hour, submitted, completed, expired, submit_failed, approved, declined, no_score, filtered, unmatched, invalid)
      select date_bin('1 hour', ${firstHour}::timestamptz, timestamptz '2000-01-01 00:00:00+00') + h * interval '1 hour',
             400, 340, 32, 28, 85, 85, 85, 85, 8, 2
        from generate_series(0, ${sql.lit(hours - 1)}) as h`.execute(db);
    await sql`
      insert into turnaround_hourly (hour, bin, requests)
      select s.hour, 80 + b, 17 from statistics_hourly s cross join generate_series(0, 19) as b`.execute(db);
  }
  await sql`analyze`.execute(db);
}
