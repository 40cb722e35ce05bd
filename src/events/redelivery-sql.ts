// Queueing events again: one event for every endpoint, or the deliveries of a status in bulk.
import { type Kysely, sql } from 'kysely';
import type { SqlSnapshot } from '../db/statements.js';
import type { EventType, Tables } from '../db/types.js';
import { targetParameters } from './record.js';
import type { WebhookTarget } from './targets.js';

const REQUEUE = `status = 'pending', attempts = 0, queued_at = excluded.queued_at,
  next_attempt_at = excluded.next_attempt_at, lease_until = null, lease_token = null, delivered_at = null`;

/**
 * The targets (`keys`) whose endpoint still exists, locked for key share: the caller's list is its
 * instance's, read up to 500 ms before, and may hold an endpoint deleted since, whose deliveries
 * would be queued again for nobody, pending for good. A delete committing meanwhile is waited for
 * (its row then skipped); one that starts after waits for the redelivery and ends what it queued.
 * Key share (as a replay's lock) keeps the row from a delete only: the writes every delivery worker
 * makes to endpoint rows while a long redelivery runs (rate and in-flight slots, health) go on.
 */
const live = (keys: readonly string[]) => sql`live as (select key from event_endpoints where key = any(${keys}::text[]) for key share)`;

/** Queues one event again for every target that receives its type (delivered or not); undefined when there is no such event. */
export async function redeliverEvent(
  db: Kysely<Tables>,
  publicId: string,
  targets: readonly (Pick<WebhookTarget, 'key' | 'shown'> & { types?: readonly string[] | null })[],
  now: Date,
): Promise<number | undefined> {
  const [keys, shown] = targetParameters(targets);
  const types = targets.map((t) => (t.types ? t.types.join(',') : null));
  const { rows } = await sql<{ found: number; queued: number }>`
    with e as (select id, customer_uuid, type from events where public_id = ${publicId}),
    ${live(keys)},
    queued as (
      insert into event_deliveries (event_id, customer_uuid, url_key, url, queued_at, next_attempt_at)
      select e.id, e.customer_uuid, t.key, t.shown, ${now}, ${now}
      from e cross join unnest(${keys}::text[], ${shown}::text[], ${types}::text[]) as t(key, shown, types)
      where (t.types is null or e.type = any(string_to_array(t.types, ',')))
        and t.key in (select key from live)
      on conflict (event_id, url_key) do update set url = excluded.url, ${sql.raw(REQUEUE)}
      returning 1
    )
    select (select count(*) from e)::int as found, (select count(*) from queued)::int as queued`.execute(db);
  const row = rows[0]!;
  return Number(row.found) === 0 ? undefined : Number(row.queued);
}

/** Which deliveries a bulk redelivery queues again: of one status, of events in [since, until), maybe of one type. */
export interface BulkRedelivery {
  status: 'dead' | 'delivered';
  since?: string | undefined;
  until?: string | undefined;
  type?: EventType | undefined;
}

/**
 * Queues again, due now with a fresh horizon, every delivery of the given status to one of the
 * targets (every endpoint this instance sends to, or the one asked for), of events created in
 * [since, until) and of the type asked for, among the types each target receives.
 */
export async function redeliverDeliveries(
  db: Kysely<Tables>,
  which: BulkRedelivery,
  targets: readonly (Pick<WebhookTarget, 'key'> & { types?: readonly string[] | null })[],
  now: Date,
): Promise<number> {
  const { rows } = await redeliverQuery(which, targets, now).execute(db);
  return Number(rows[0]?.n ?? 0);
}

/** The statement of redeliverDeliveries: one row, n queued. */
export function redeliverQuery(
  which: BulkRedelivery,
  targets: readonly (Pick<WebhookTarget, 'key'> & { types?: readonly string[] | null })[],
  now: Date,
) {
  const keys = targets.map((t) => t.key);
  const types = targets.map((t) => (t.types ? t.types.join(',') : null));
  return sql<{ n: number }>`
    with ${live(keys)},
    queued as (
      update event_deliveries d
      set status = 'pending', attempts = 0, queued_at = ${now}, next_attempt_at = ${now}, lease_until = null, lease_token = null,
          delivered_at = null
      from events e, unnest(${keys}::text[], ${types}::text[]) as t(key, types)
      where e.id = d.event_id and d.status = ${which.status} and d.url_key = t.key and t.key in (select key from live)
        and (t.types is null or e.type = any(string_to_array(t.types, ',')))
        ${which.type === undefined ? sql`` : sql`and e.type = ${which.type}`}
        ${which.since === undefined ? sql`` : sql`and e.created_at >= ${which.since}::timestamptz`}
        ${which.until === undefined ? sql`` : sql`and e.created_at < ${which.until}::timestamptz`}
      returning 1
    )
    select count(*)::int as n from queued`;
}

const AT = new Date('2026-01-01T00:00:00Z');
const TARGET = { key: 'k', shown: 'https://receiver.example/hook', types: ['underwriting.completed'] };

/** The builder queries above as `npm run sql:snapshot` writes them (docs/layout.md). */
export const SQL_SNAPSHOTS: readonly SqlSnapshot[] = [
  { name: 'redeliver_event', rows: [[{ found: 1, queued: 1 }]], run: (db) => redeliverEvent(db, 'evt', [TARGET], AT) },
  { name: 'redeliver_dead', run: (db) => redeliverDeliveries(db, { status: 'dead', since: '2026-01-01T00:00:00Z', until: '2026-01-02T00:00:00Z' }, [TARGET], AT) },
  { name: 'redeliver_by_type', run: (db) => redeliverDeliveries(db, { status: 'delivered', type: 'underwriting.completed' }, [TARGET], AT) },
];
