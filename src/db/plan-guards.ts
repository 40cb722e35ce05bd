import { type Kysely, sql } from 'kysely';
import type { Tables } from './types.js';

// Plans that must not depend on statistics (issue 34, docs/performance.md): where a statement's
// only sane plan is known, a SET LOCAL in its own transaction takes the others away from the
// planner (SET LOCAL: also behind a transaction pooler, and gone at commit).

/**
 * No sort: the rows come in the order of the index that yields it, and the walk stops at the
 * limit. Without statistics the planner guesses 1 row in 200 matches, so reading every match
 * through a bitmap and sorting looked cheaper than the ordered walk: work in proportion to the
 * matches (a backlog, a table) instead of the page.
 */
export const IN_INDEX_ORDER = sql`set local enable_sort = off`;

/**
 * No sequential scan: every lookup has its index, but without statistics (or with statistics from
 * when the tables were small) the planner guesses that `= any` of 500 ids matches a third of a table.
 */
export const INDEX_LOOKUPS_ONLY = sql`set local enable_seqscan = off`;

/**
 * No sequential scan and no plain index scan: a range is read by bitmap, each heap page once in
 * page order, however many rows (and row versions) it holds; a lookup by id is a bitmap of one
 * entry, about as cheap as an index scan (bench/investigations/open-tail.ts). For the statistics
 * read, whose open tail is a range of fresh rows, each with an index entry per version (inserted
 * `submitting`, then `submitted`, then answered: never HOT): statistics from when the table was
 * small make the planner walk that range by index scan, a heap visit per entry (400,000 rows of
 * the last 150 s: 1,060,000 buffers and 600-980 ms, against 24,000 and 350-450 ms by bitmap).
 */
export const RANGES_BY_BITMAP = sql`select set_config('enable_seqscan', 'off', true), set_config('enable_indexscan', 'off', true), set_config('enable_indexonlyscan', 'off', true)`;

/**
 * For a transaction that inserts many rows at once (a campaign's batch): each row's foreign-key
 * checks (a SELECT per row and per key, run by PostgreSQL itself) use the plan the connection
 * cached for them instead of being planned again per row, as NO_GENERIC_PLANS (db/handle.ts)
 * has them planned everywhere else. That planning was about a quarter of the database's CPU per
 * campaign line (bench/investigations/campaign-upload.ts, docs/campaigns.md). Sequential scans are
 * off too, so the plan cached here is the primary key's lookup whatever the tables' size when it
 * was made (NO_GENERIC_PLANS's reason: a generic plan made while the tables were tiny scanned them
 * whole once they had grown). Other transactions keep planning every check (force_custom_plan
 * never uses the cached plan).
 */
export const FOREIGN_KEY_CHECKS_PLANNED_ONCE = sql`select set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true)`;

/**
 * For a hot statement whose plan does not depend on its parameters' values (the callback batch:
 * the batch's JSON and the skew only feed lookups by index): the first statements of its own
 * transaction, sent with BEGIN in one round trip (runStatement's `plannedOnce`). The prepared
 * statement's generic plan and each foreign-key check's are made once per connection and kept,
 * instead of being planned per batch and per row as NO_GENERIC_PLANS (db/handle.ts) has them
 * everywhere else; sequential scans are off while they are made, so that a plan made while the
 * tables were tiny is still every index's lookup once they have grown (NO_GENERIC_PLANS's reason).
 * SQL text, not a template: it is sent on the statement's own connection.
 */
export const STATEMENT_PLANNED_ONCE = 'set local plan_cache_mode = force_generic_plan; set local enable_seqscan = off';

/** Runs `work` in a transaction of its own in which no plan may sort (IN_INDEX_ORDER). */
export function inIndexOrder<T>(db: Kysely<Tables>, work: (trx: Kysely<Tables>) => Promise<T>): Promise<T> {
  return db.transaction().execute(async (trx) => {
    await IN_INDEX_ORDER.execute(trx);
    return work(trx);
  });
}

/**
 * Index scans only, no sequential scan and no bitmap: for counts through a partial index whose rows
 * change (the requests in flight, the pending deliveries). Each such row leaves an entry per version
 * it had while it matched (a request: `submitting`, then `submitted`) until vacuum removes them; a
 * bitmap scan visits every one of them on every read, an index scan marks each dead on its first
 * visit and later reads skip it (docs/performance.md).
 */
export const INDEX_SCANS_ONLY_SQL = "select set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true)";
export const INDEX_SCANS_ONLY = sql.raw(INDEX_SCANS_ONLY_SQL);
