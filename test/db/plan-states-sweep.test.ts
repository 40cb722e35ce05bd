import { type Kysely, sql } from 'kysely';
import { INDEX_SCANS_ONLY } from '../../src/db/plan-guards.js';
import type { Tables } from '../../src/db/types.js';
import { EXPIRE_BATCH, expireBatchParameters, SWEEP_OVERLAP_MS } from '../../src/requests/expiry.js';
import { abandonedQuery } from '../../src/requests/sql.js';
import t from 'tap';
import { freshDatabase, SERVER_URL } from '../helpers/database.js';
import { until } from '../helpers/until.js';
import { FLAT, grow, inline, LARGE, measure, type Measured, PLAN_STATES_FILE_TIMEOUT_MS, prepare, SET_UP_QUERY_TIMEOUT_MS, SMALL, STATISTICS_STATES } from '../helpers/statement-cost.js';

t.setTimeout(PLAN_STATES_FILE_TIMEOUT_MS);

// Issue 34: the expiry sweep's two reads, every 30 s on every instance, cost what is due since the
// previous pass, not what was ever answered. Every answered request leaves a dead entry in both
// indexes they read by (its `submitting` and its `submitted` version) until a vacuum: read from the
// beginning, they visited them all (at 1M requests, 36,000-44,000 buffers each). Buffers, not timings.

const TIMEOUT_S = 3600;
const ABANDONED_MS = 20_000;
const DUE = 20;

/** DUE requests `submitted` past the callback timeout and DUE `submitting` past the abandoned bound, all since the previous pass's cutoffs. */
async function due(db: Kysely<Tables>, prefix: string, now: Date): Promise<void> {
  for (const [status, ageMs] of [['submitted', TIMEOUT_S * 1000 + 60_000], ['submitting', ABANDONED_MS + 60_000]] as const) {
    await sql`
      insert into underwriting_requests (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, status, submitted_at, updated_at)
      select ${`${prefix}-${status}-`} || g, 'h', '***.456.789-**', false, 'submitting', ${new Date(now.getTime() - ageMs)}::timestamptz, now()
        from generate_series(1, ${DUE}::int) g`.execute(db);
    if (status === 'submitted') await sql`update underwriting_requests set status = 'submitted' where customer_uuid like ${`${prefix}-submitted-%`}`.execute(db);
  }
}

/** A pass's two reads as the sweep runs them on the routes' pool (custom plans), each from its previous cutoff less the overlap. */
async function pass(db: Kysely<Tables>, now: Date): Promise<{ expire: Measured; release: Measured }> {
  const expiredSince = new Date(now.getTime() - TIMEOUT_S * 1000 - 30_000 - SWEEP_OVERLAP_MS);
  const releasedSince = new Date(now.getTime() - ABANDONED_MS - 30_000 - SWEEP_OVERLAP_MS);
  const release = abandonedQuery(db, { now, afterMs: ABANDONED_MS, since: releasedSince, limit: 1000 }).compile();
  // Each read under INDEX_SCANS_ONLY, as the sweep runs it.
  const guard = INDEX_SCANS_ONLY.compile(db).sql;
  return db.connection().execute(async (conn) => ({
    expire: await measure(conn, inline(EXPIRE_BATCH.submitted.text, expireBatchParameters(now, TIMEOUT_S, expiredSince)), guard),
    release: await measure(conn, inline(release.sql, release.parameters), guard),
  }));
}

// PostgreSQL only: the plans and buffers that matter are the server's; what the sweep ends is
// checked on both engines by test/requests/expiry.test.ts.
for (const state of SERVER_URL ? STATISTICS_STATES : []) {
  t.test(`the expiry sweep's reads cost what is due since the last pass, however much was answered before (${state})`, async (t) => {
    const { db } = await freshDatabase(t, { queryTimeoutMs: SET_UP_QUERY_TIMEOUT_MS });
    await prepare(db, state);
    // Requests answered a day ago (each left its dead versions), and each customer's newest waiting.
    await grow(db, state, 's', SMALL);
    const now = new Date();
    await due(db, 's', now);
    const small = await pass(db, now);
    // The due ones answered (two more dead entries each), the history grown, and passes later: a
    // pass reads what was submitted since the last one's cutoff, here the next due ones.
    await sql`update underwriting_requests set status = 'completed' where customer_uuid like 's-%'`.execute(db);
    await grow(db, state, 'l', LARGE);
    const later = new Date(now.getTime() + 3_600_000);
    await due(db, 'l', later);
    const large = await pass(db, later);
    for (const { expire, release } of [small, large]) {
      t.match(expire.plan, new RegExp(`Update on underwriting_requests r \\(actual rows=${DUE}(\\.00)? loops=1\\)`), 'the due ones expired', { plan: expire.plan });
      t.match(release.plan, new RegExp(`Limit \\(actual rows=${DUE}(\\.00)? loops=1\\)`), 'the abandoned ones found', { plan: release.plan });
      t.match(expire.plan, /Index Scan using underwriting_requests_waiting on underwriting_requests/, 'expire: by the index of what waits', { plan: expire.plan });
      t.match(release.plan, /Index Scan using underwriting_requests_status_list on underwriting_requests/, 'release: by status and time', { plan: release.plan });
    }
    for (const read of ['expire', 'release'] as const) {
      // The abandoned read of 20 costs 9-33 buffers, and which of those a run sees depends on what
      // the server's other sessions hold (a snapshot in another database keeps the dead entries'
      // tuples from counting as dead): a few pages more are allowed, never a table's growth (read
      // from the beginning: 43-53 vs 506-552).
      t.ok(large[read].blocks <= FLAT * small[read].blocks + 20, `${read}: buffers flat, ${small[read].blocks} at ${SMALL * 2} requests, ${large[read].blocks} at ${(SMALL + LARGE) * 2}`, {
        plan: large[read].plan,
      });
    }
  });
}

/** Resolves once every transaction that had an id when this is called (in any database on the server) has ended. */
async function olderWritersGone(db: Kysely<Tables>): Promise<void> {
  const { rows } = await sql<{ xid: string }>`select pg_current_xact_id()::text as xid`.execute(db);
  const marker = rows[0]!.xid;
  let running = '';
  try {
    await until(async () => {
      const { rows } = await sql<{ gone: boolean; running: string | null }>`
        select pg_snapshot_xmin(pg_current_snapshot()) > ${marker}::xid8 as gone,
               (select string_agg(format('%s (pid %s, since %s)', datname, pid, xact_start), ', ')
                  from pg_stat_activity where backend_xid is not null and pid <> pg_backend_pid()) as running`.execute(db);
      running = rows[0]!.running ?? 'none';
      return rows[0]!.gone;
    }, 240_000, 'the end of the transactions that wrote before the answers');
  } catch (err) {
    throw new Error(`${(err as Error).message}; transactions with an id still running: ${running}`);
  }
}

if (SERVER_URL) {
  t.test("a pass marks the dead entries it visits, so the next pass over the same stretch skips them", async (t) => {
    const { db } = await freshDatabase(t, { queryTimeoutMs: SET_UP_QUERY_TIMEOUT_MS });
    await prepare(db, 'never analysed');
    const now = new Date();
    // 2,000 requests submitted within the expiry read's window and answered since: a dead entry each
    // in the index it reads, and nothing due.
    await sql`
      insert into underwriting_requests (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, status, submitted_at, updated_at)
      select 'window-' || g, 'h', '***.456.789-**', false, 'submitting', ${new Date(now.getTime() - TIMEOUT_S * 1000 - 60_000)}::timestamptz, now()
        from generate_series(1, 2000) g`.execute(db);
    await sql`update underwriting_requests set status = 'submitted' where customer_uuid like 'window-%'`.execute(db);
    await sql`update underwriting_requests set status = 'completed' where customer_uuid like 'window-%'`.execute(db);
    const first = await pass(db, now);
    // A pass marks an entry dead only once no transaction that could see its tuple runs. A backend
    // judges that first by its snapshot's xmin, the oldest transaction id still running in any
    // database on the server: while a transaction that wrote before the answers runs elsewhere
    // (another test file's, in CI: this test once waited 10 s in vain), the entries are not marked.
    await olderWritersGone(db);
    // And once its tuple's xmax-committed hint is set, which PostgreSQL defers while a commit of the
    // same clog group is not yet flushed (another database's asynchronous commit): the passes after
    // it skip it once it is.
    const later = await until(async () => {
      const next = await pass(db, now);
      return next.expire.blocks * 2 < first.expire.blocks && next;
    }, 10_000, 'a pass that skips the marked entries');
    t.ok(later.expire.blocks * 2 < first.expire.blocks, `expire: ${first.expire.blocks} buffers, then ${later.expire.blocks}`, { plan: later.expire.plan });
  });
}
