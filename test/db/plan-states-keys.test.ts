import { sql } from 'kysely';
import t from 'tap';
import { storedCampaignKeyQuery } from '../../src/campaigns/sql.js';
import { storedKeyQuery } from '../../src/requests/idempotency.js';
import { keyDigester } from '../../src/requests/key-digest.js';
import { freshDatabase, SERVER_URL } from '../helpers/database.js';
import { FLAT, inline, measure, PLAN_STATES_FILE_TIMEOUT_MS, prepare, SET_UP_QUERY_TIMEOUT_MS, STATISTICS_STATES } from '../helpers/statement-cost.js';
import type { Kysely } from 'kysely';
import type { Tables } from '../../src/db/types.js';

t.setTimeout(PLAN_STATES_FILE_TIMEOUT_MS);

// Issue 34: the look-up of a key's stored form (every keyed submit and keyed campaign upload runs
// it: src/requests/idempotency.ts storedKeyOf, src/campaigns/sql.ts storedCampaignKeyOf) reads the
// key's own index entries whatever the statistics say, never the day's keys by their expiry or
// the campaigns by their creation (both are ordered by time, with `limit 1`: an index on time is
// the planner's tempting wrong choice). PostgreSQL only: the assertions are about its planner.

const digests = keyDigester(['plan-states-keys-cpf-hash-key-0123456789abcdef']);

/** `n` keys stored over the last day (digests, and every tenth as sent by an earlier version), and a campaign for every tenth. */
async function growKeys(db: Kysely<Tables>, prefix: string, n: number): Promise<void> {
  const keys = Array.from({ length: n }, (_, i) => (i % 10 === 0 ? `${prefix}-${i}` : digests.digest(`${prefix}-${i}`)));
  await db.transaction().execute(async (trx) => {
    await sql`set local statement_timeout = 0`.execute(trx);
    await sql`insert into idempotency_keys (key, body_hash, created_at, expires_at)
      select k, 'h', now() - (i % 86400) * interval '1 second', now() + interval '1 day' - (i % 86400) * interval '1 second'
        from unnest(${keys}::text[]) with ordinality as u(k, i)`.execute(trx);
    await sql`insert into campaigns (public_id, source, created_by, created_at, idempotency_key)
      select 'cmp_' || md5(k), 'csv', 'peer:test', now() - (i % 86400) * interval '1 second', k
        from unnest(${keys}::text[]) with ordinality as u(k, i) where i % 10 = 1`.execute(trx);
  });
}

for (const state of SERVER_URL ? STATISTICS_STATES : []) {
  t.test(`a key's stored form is found by its own index, at a cost flat in the day's keys (${state})`, async (t) => {
    const { db } = await freshDatabase(t, { queryTimeoutMs: SET_UP_QUERY_TIMEOUT_MS });
    await prepare(db, state);
    await sql`alter table campaigns set (autovacuum_enabled = off)`.execute(db);
    if (state === 'analysed empty, then grown') await sql`analyze campaigns`.execute(db);
    const reads = async (prefix: string) => {
      const now = new Date();
      const statements = {
        // A key stored as sent (an earlier version's), and one stored as its digest.
        'stored_key_of, as sent': storedKeyQuery(db, digests.candidates(`${prefix}-10`), now).compile(),
        'stored_key_of, digest': storedKeyQuery(db, digests.candidates(`${prefix}-11`), now).compile(),
        'stored_key_of, a new key': storedKeyQuery(db, digests.candidates(`${prefix}-new`), now).compile(),
        'stored_campaign_key_of, as sent': storedCampaignKeyQuery(digests.candidates(`${prefix}-10`), now).compile(db),
        'stored_campaign_key_of, a new key': storedCampaignKeyQuery(digests.candidates(`${prefix}-new`), now).compile(db),
      };
      const measured = [];
      for (const [name, q] of Object.entries(statements)) measured.push({ name, ...(await db.connection().execute((conn) => measure(conn, inline(q.sql, q.parameters)))) });
      return measured;
    };
    await growKeys(db, 'm', 10_000);
    const small = await reads('m');
    await growKeys(db, 'l', 60_000);
    if (state === 'analysed') await sql`analyze idempotency_keys; analyze campaigns`.execute(db);
    const large = await reads('l');
    for (const [i, read] of small.entries()) {
      for (const { plan } of [read, large[i]!]) {
        t.notMatch(plan, /Seq Scan|idempotency_keys_expiry|campaigns_list/, `${read.name}: by the key's index`, { plan });
        t.match(plan, /idempotency_keys_pkey|campaigns_idempotency_key/, `${read.name}: the key's index`, { plan });
      }
      // A handful of buffers either way (index levels, the row, and once analysed the planner's probe of
      // the time index's ends): 16 is far below any read of the day's keys (hundreds of pages at 70,000).
      t.ok(large[i]!.blocks <= Math.max(FLAT * read.blocks, 16), `${read.name}: buffers flat, ${read.blocks} at 10,000 keys, ${large[i]!.blocks} at 70,000`, { plan: large[i]!.plan });
    }
  });
}
