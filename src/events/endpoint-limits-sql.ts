// What the delivery worker keeps in an endpoint's row across instances: since when it fails (and
// its disabling), its rate's slots per second, its in-flight slots per worker.
import { type Kysely, sql } from 'kysely';
import type { SqlSnapshot } from '../db/statements.js';
import type { Tables } from '../db/types.js';
import { isoSql, recordEventsSql } from './record.js';

/** Since when an endpoint has failed every attempt (kept when already failing), or null after a 2xx. */
export async function recordEndpointFailing(db: Kysely<Tables>, key: string, since: Date | null): Promise<void> {
  await db
    .updateTable('event_endpoints')
    .set(since === null ? { failing_since: null } : { failing_since: sql<Date>`coalesce(failing_since, ${since}::timestamptz)` })
    .where('key', '=', key)
    .$if(since === null, (q) => q.where('failing_since', 'is not', null))
    .execute();
}

/**
 * Disables an active endpoint that has failed every attempt for afterS, and records its
 * endpoint.disabled event in the same statement (an instance that loses the race to it changes
 * and records nothing). True when this call disabled it.
 */
export async function disableFailingEndpoint(
  db: Kysely<Tables>,
  d: { key: string; at: Date; afterS: number; lastError: string },
): Promise<boolean> {
  const { rows } = await sql<{ n: number }>`
    with disabled as (
      update event_endpoints
      set status = 'disabled', updated_at = ${d.at}::timestamptz,
          disabled_reason = 'every attempt failed since ' || ${sql.raw(isoSql('failing_since'))} || '; last: ' || ${d.lastError}::text
      where key = ${d.key} and status = 'active' and failing_since is not null
        and failing_since <= ${d.at}::timestamptz - make_interval(secs => ${d.afterS}::double precision)
      returning id, shown_url, disabled_reason, failing_since
    ),
    source as (
      select 'endpoint.disabled'::text as type, x.id as customer_uuid, ${d.at}::timestamptz as created_at,
             null::bigint as request_id, null::bigint as callback_id,
             jsonb_build_object('endpointId', x.id, 'url', x.shown_url, 'disabledReason', x.disabled_reason,
                                'failingSince', ${sql.raw(isoSql('x.failing_since'))}) as data
      from disabled x
    ),
    ${sql.raw(recordEventsSql('source'))}
    select count(*)::int as n from new_events`.execute(db);
  return Number(rows[0]?.n ?? 0) > 0;
}

/**
 * Reserves up to `want` attempt slots of an endpoint's rate in the second `window` (Unix seconds),
 * across every instance: the number granted (0 when that second's are taken).
 */
export async function reserveRateSlots(db: Kysely<Tables>, key: string, window: number, want: number, limit: number): Promise<number> {
  const { rows } = await sql<{ granted: number }>`
    with cur as (
      select key, case when rate_window = ${window}::bigint then rate_used else 0 end as used
      from event_endpoints where key = ${key} for no key update
    ),
    g as (select cur.key, cur.used, least(${want}::int, greatest(0, ${limit}::int - cur.used)) as granted from cur),
    u as (
      update event_endpoints e set rate_window = ${window}::bigint, rate_used = g.used + g.granted
      from g where e.key = g.key
      returning g.granted
    )
    select granted from u`.execute(db);
  return Number(rows[0]?.granted ?? 0);
}

/**
 * Reserves up to `want` of an endpoint's max_in_flight slots for `holder` (one delivery worker),
 * across every instance: in the endpoint's row, under its lock, as the rate's slots are. Holders'
 * entries past their `until` (their instance died without giving them back) count no more and are
 * dropped. Idempotent: the holder's entry is written as the absolute count it holds, `held` (what
 * the worker knows it holds) plus those granted, whatever the row said of it, so that a reservation
 * that committed without the worker learning it is undone by its next write. Its `until` is the
 * database's now() plus `ttlS`. The row is not written when nothing changes (nothing granted,
 * nothing expired, its entry already `held`). The number granted (0 when all are held).
 */
export async function reserveInFlightSlots(
  db: Kysely<Tables>,
  s: { key: string; holder: string; held: number; want: number; limit: number; ttlS: number },
): Promise<number> {
  const { rows } = await sql<{ granted: number }>`
    with cur as (
      select key, in_flight from event_endpoints where key = ${s.key} for no key update
    ),
    held as (
      select cur.key,
             coalesce((cur.in_flight -> ${s.holder}::text ->> 'n')::int, 0) as mine,
             coalesce(sum((x.v ->> 'n')::int) filter (where (x.v ->> 'until')::timestamptz > now()), 0) as others,
             count(x.h) filter (where (x.v ->> 'until')::timestamptz <= now()) as expired,
             coalesce(jsonb_object_agg(x.h, x.v) filter (where (x.v ->> 'until')::timestamptz > now()), '{}'::jsonb) as kept
      from cur
      left join lateral jsonb_each(cur.in_flight) as x(h, v) on x.h <> ${s.holder}::text
      group by cur.key, cur.in_flight
    ),
    g as (select held.*, least(${s.want}::int, greatest(0, ${s.limit}::int - held.others - ${s.held}::int)) as granted from held),
    u as (
      update event_endpoints e
      set in_flight = case when ${s.held}::int + g.granted = 0 then g.kept
                           else g.kept || jsonb_build_object(${s.holder}::text, jsonb_build_object(
                                  'n', ${s.held}::int + g.granted, 'until', now() + make_interval(secs => ${s.ttlS}::float8))) end
      from g
      where e.key = g.key and (g.granted > 0 or g.expired > 0 or g.mine <> ${s.held}::int)
    )
    select granted from g`.execute(db);
  return Number(rows[0]?.granted ?? 0);
}

/**
 * Writes the holder's in-flight slots of one endpoint as the absolute count `held` it now holds
 * (its entry removed at 0), so that a write repeated or lost is made good by the next; with no key,
 * removes its entries of every endpoint (at shutdown).
 */
export async function releaseInFlightSlots(db: Kysely<Tables>, s: { key?: string; holder: string; held?: number; ttlS: number }): Promise<void> {
  const held = s.key === undefined ? 0 : (s.held ?? 0);
  await sql`
    update event_endpoints
    set in_flight = case when ${held}::int <= 0 then in_flight - ${s.holder}::text
                         else in_flight || jsonb_build_object(${s.holder}::text, jsonb_build_object(
                                'n', ${held}::int, 'until', now() + make_interval(secs => ${s.ttlS}::float8))) end
    where ${s.key === undefined ? sql`in_flight -> ${s.holder}::text is not null` : sql`key = ${s.key}`}`.execute(db);
}

const AT = new Date('2026-01-01T00:00:00Z');

/** The builder queries above as `npm run sql:snapshot` writes them (docs/layout.md). */
export const SQL_SNAPSHOTS: readonly SqlSnapshot[] = [
  { name: 'record_endpoint_failing', run: (db) => recordEndpointFailing(db, 'k', AT) },
  { name: 'record_endpoint_recovered', run: (db) => recordEndpointFailing(db, 'k', null) },
  { name: 'disable_failing_endpoint', run: (db) => disableFailingEndpoint(db, { key: 'k', at: AT, afterS: 60, lastError: 'e' }) },
  { name: 'reserve_rate_slots', run: (db) => reserveRateSlots(db, 'k', 1, 5, 10) },
  { name: 'reserve_in_flight_slots', run: (db) => reserveInFlightSlots(db, { key: 'k', holder: 'h', held: 1, want: 2, limit: 3, ttlS: 7 }) },
  { name: 'release_in_flight_slots', run: (db) => releaseInFlightSlots(db, { key: 'k', holder: 'h', held: 1, ttlS: 7 }) },
];
