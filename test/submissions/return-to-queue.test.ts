import { sql } from 'kysely';
import pg from 'pg';
import t from 'tap';
import { returnToQueue } from '../../src/submissions/queue.js';
import { freshDatabase } from '../helpers/database.js';

// A forward the provider certainly did not receive goes back to the queue (src/submissions/queue.ts:
// return_to_queue). Its campaign may have been cancelled while it was being sent: a cancel ends
// what is not yet forwarded, and a request returned after it was queued again and sent anyway.

t.test('a request the provider never got is queued again; if its campaign was cancelled meanwhile it ends cancelled, with its event', async (t) => {
  const database = await freshDatabase(t);
  const { db } = database;
  const now = new Date();
  const campaign = async (publicId: string, status: string) =>
    Number(
      (
        await sql<{ id: number }>`
          insert into campaigns (public_id, status, source, created_by) values (${publicId}, ${status}, 'ndjson', 'test') returning id`.execute(db)
      ).rows[0]!.id,
    );
  const sending = async (customer: string, campaignId: number | null) =>
    Number(
      (
        await sql<{ id: number }>`
          insert into underwriting_requests (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, status, submitted_at, updated_at, queued_at, campaign_id)
          values (${customer}, 'h', '***.456.789-**', false, 'submitting', ${now}, ${now}, ${new Date(now.getTime() - 60_000)}, ${campaignId})
          returning id`.execute(db)
      ).rows[0]!.id,
    );
  const row = async (id: number) =>
    (await sql<{ status: string; queued_body: Buffer | null; upstream_error: string | null; forward_attempts: number }>`
      select status, queued_body, upstream_error, forward_attempts from underwriting_requests where id = ${id}`.execute(db)).rows[0]!;
  const events = async (customer: string) =>
    (await sql<{ type: string }>`select type from events where customer_uuid = ${customer} order by id`.execute(db)).rows.map((r) => r.type);
  const sealed = Buffer.from('sealed body');
  const refused = { upstreamStatus: null, error: 'provider unreachable: ECONNREFUSED' };

  const alone = await sending('rq-alone', null);
  t.equal(await returnToQueue(db, alone, sealed, refused, now), 'queued', 'a request of no campaign');
  t.match(await row(alone), { status: 'queued', upstream_error: refused.error, forward_attempts: 1 });

  const running = await sending('rq-running', await campaign('cmp_running', 'running'));
  t.equal(await returnToQueue(db, running, sealed, refused, now), 'queued', 'a running campaign\'s request');
  t.equal((await row(running)).status, 'queued');

  const cancelledCampaign = await campaign('cmp_cancelled', 'cancelled');
  const late = await sending('rq-cancelled', cancelledCampaign);
  t.equal(await returnToQueue(db, late, sealed, refused, now), 'cancelled', 'a cancelled campaign\'s request is not queued again');
  t.match(await row(late), { status: 'cancelled', queued_body: null, upstream_error: refused.error, forward_attempts: 1 }, 'no sealed body kept, the reason kept');
  const times = (await sql<{ same: boolean }>`select submitted_at = queued_at as same from underwriting_requests where id = ${late}`.execute(db)).rows[0]!;
  t.ok(times.same, 'dated by its queueing, as a request cancelled from the queue (statistics and retention read submitted_at)');
  t.same(await events('rq-cancelled'), ['underwriting.cancelled'], 'with its event');
  t.same(await events('rq-alone'), [], 'a return to the queue records none');

  const stale = await sending('rq-stale', cancelledCampaign);
  t.equal(await returnToQueue(db, stale, sealed, null, now), 'cancelled', 'a claim whose slot went stale (never tried) too');
  t.match(await row(stale), { status: 'cancelled', forward_attempts: 0 });

  t.equal(await returnToQueue(db, late, sealed, refused, now), undefined, 'a request no longer being sent is left alone');

  if (database.url) {
    // A cancel committing while the return runs: the return waits for the campaign's row and sees it.
    const racing = await sending('rq-race', await campaign('cmp_race', 'running'));
    const canceller = new pg.Client({ connectionString: database.url });
    await canceller.connect();
    t.teardown(() => canceller.end());
    await canceller.query('begin');
    await canceller.query(`update campaigns set status = 'cancelled' where public_id = 'cmp_race'`);
    let settled = false;
    const returned = returnToQueue(db, racing, sealed, refused, now).finally(() => (settled = true));
    const watcher = new pg.Client({ connectionString: database.url });
    await watcher.connect();
    t.teardown(() => watcher.end());
    // Wait (on the server's own view, not a sleep) until the return blocks on the cancel's row lock
    // (or has finished without waiting for it: then the assertions below say what it did).
    while (!settled) {
      const { rows } = await watcher.query<{ n: number }>(
        `select count(*)::int as n from pg_stat_activity
          where datname = current_database() and wait_event_type = 'Lock' and query like '%campaigns c%for share%'`,
      );
      if (rows[0]!.n > 0) break;
      await new Promise((resolve) => setImmediate(resolve));
    }
    await canceller.query('commit');
    t.equal(await returned, 'cancelled', 'the cancel committed meanwhile is seen');
    t.equal((await row(racing)).status, 'cancelled');
  }
});
