// Deliveries still to make, written or not: the pending gauge and the statistics' counts.
import { type Kysely, sql } from 'kysely';
import type { SqlSnapshot } from '../db/statements.js';
import type { Tables } from '../db/types.js';
import { receivesSql } from './feed-sql.js';

/**
 * One row (n, oldest): the configured targets' deliveries not written yet (events past a
 * target's dispatch position), and the time of the oldest such event.
 */
export function unwrittenDeliveriesSql(keys: readonly string[]) {
  return sql`
    select (select count(*) from event_dispatch c left join event_endpoints p on p.key = c.url_key
              join events e on (e.tx_id, e.id) > (c.tx_id, c.event_id) and ${receivesSql('p', 'e')}
             where c.url_key = any(${keys}::text[])) as n,
           (select min(f.created_at) from event_dispatch c left join event_endpoints p on p.key = c.url_key
              cross join lateral (select e.created_at from events e where (e.tx_id, e.id) > (c.tx_id, c.event_id) and ${receivesSql('p', 'e')}
                                   order by e.tx_id, e.id limit 1) f
             where c.url_key = any(${keys}::text[])) as oldest`;
}

/** The pending deliveries not written yet of one endpoint per row (c: event_dispatch, for deliveriesByUrlQuery). */
export function unwrittenByUrlSql(keys: readonly string[]) {
  return sql`
    select c.url, 'pending' as status from event_dispatch c left join event_endpoints p on p.key = c.url_key
      join events e on (e.tx_id, e.id) > (c.tx_id, c.event_id) and ${receivesSql('p', 'e')}
     where c.url_key = any(${keys}::text[])`;
}

/**
 * Pending deliveries: those written, and those of the configured targets not written yet; the
 * oldest by when it was queued (its event's time).
 */
export async function pendingSummary(db: Kysely<Tables>, keys: readonly string[] = []): Promise<{ pending: number; oldest: Date | null }> {
  const { rows } = await sql<{ n: string; oldest: Date | null }>`
    with written as (
      select count(*) as n, min(d.queued_at) as oldest from event_deliveries d where d.status = 'pending'
    ),
    unwritten as (${unwrittenDeliveriesSql(keys)})
    select (w.n + u.n)::text as n, least(w.oldest, u.oldest) as oldest from written w, unwritten u`.execute(db);
  const row = rows[0]!;
  return { pending: Number(row.n), oldest: row.oldest ? new Date(row.oldest) : null };
}


/** The builder queries above as `npm run sql:snapshot` writes them (docs/layout.md). */
export const SQL_SNAPSHOTS: readonly SqlSnapshot[] = [
  { name: 'pending_summary', rows: [[{ n: '0', oldest: null }]], run: (db) => pendingSummary(db, ['k']) },
];
