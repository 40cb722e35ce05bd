import type { EventType } from '../db/types.js';
import type { WebhookTarget } from './targets.js';

// SQL pieces that record events inside the statement that makes the change (the callback's group
// commit, the expiry sweep, a failed submit), so a change is never committed without its event.

/** A timestamptz as the API writes it (Date.toISOString: UTC, milliseconds). */
export const isoSql = (column: string) => `to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/**
 * A request as GET /v1/underwritings/:customerUuid returns it (without history and unmatched),
 * from an underwriting_requests row aliased `r` and its result body.
 */
export function requestDataSql(r: string, result: string): string {
  return `jsonb_build_object(
    'customerUuid', ${r}.customer_uuid, 'status', ${r}.status, 'decision', ${r}.decision,
    'cpfMasked', ${r}.cpf_masked, 'costSavingEnabled', ${r}.cost_saving_enabled, 'srd', ${r}.srd,
    'submittedAt', ${isoSql(`${r}.submitted_at`)}, 'completedAt', ${isoSql(`${r}.completed_at`)},
    'upstreamStatus', ${r}.upstream_status, 'result', ${result})`;
}

/** callback.unmatched's data, from a callbacks row aliased `c`. */
export function unmatchedDataSql(c: string): string {
  return `jsonb_build_object('customerUuid', ${c}.customer_uuid, 'receivedAt', ${isoSql(`${c}.received_at`)}, 'result', ${c}.body)`;
}

/**
 * CTEs that insert one event per row of `source` (columns: type, customer_uuid, created_at,
 * request_id, callback_id, data) and one pending delivery per event and webhook target, the
 * targets coming as two text[] parameters (keys, shown URLs). Append after the statement's own
 * CTEs, with a leading comma.
 *
 * With `lease` (two parameters: the token and the lease's end), a delivery is
 * leased at once to the instance writing it, unless an earlier delivery of the same customer to
 * the same URL is still pending (it must go first: the claim takes it later, in order). The
 * statement can then return what to send (`new_deliveries` has event_id, url_key, lease_token),
 * and the instance sends it without a claim.
 */
export function recordEventsSql(source: string, keysParam: string, shownParam: string, lease?: { token: string; until: string }): string {
  const events = `
    new_events as (
      insert into events (public_id, type, customer_uuid, created_at, request_id, callback_id, data)
      select 'evt_' || replace(gen_random_uuid()::text, '-', ''), s.type, s.customer_uuid, s.created_at,
             s.request_id, s.callback_id, s.data
      from ${source} s
      order by s.customer_uuid
      returning id, customer_uuid, created_at${lease ? ', public_id, type, callback_id, data' : ''}
    ),`;
  if (!lease) {
    return `${events}
    new_deliveries as (
      insert into event_deliveries (event_id, customer_uuid, url_key, url, queued_at, next_attempt_at)
      select e.id, e.customer_uuid, t.key, t.shown, e.created_at, e.created_at
      from new_events e cross join unnest(${keysParam}::text[], ${shownParam}::text[]) as t(key, shown)
    )`;
  }
  return `${events}
    new_deliveries as (
      insert into event_deliveries (event_id, customer_uuid, url_key, url, queued_at, next_attempt_at, lease_until, lease_token)
      select e.id, e.customer_uuid, t.key, t.shown, e.created_at, e.created_at,
             case when l.leased then ${lease.until}::timestamptz end, case when l.leased then ${lease.token}::text end
      from new_events e cross join unnest(${keysParam}::text[], ${shownParam}::text[]) as t(key, shown)
      cross join lateral (
        select not exists (
          select 1 from event_deliveries p
          where p.status = 'pending' and p.url_key = t.key and p.customer_uuid = e.customer_uuid) as leased
      ) l
      returning id, event_id, url_key, lease_token
    )`;
}

/** An event as pushed: the body every attempt sends, from a new_events (or events) row aliased `e`. */
export function eventBodySql(e: string): string {
  return `json_build_object('id', ${e}.public_id, 'type', ${e}.type, 'timestamp', ${isoSql(`${e}.created_at`)}, 'data', ${e}.data)::text`;
}

/** The two parameters recordEventsSql reads. */
export function targetParameters(targets: readonly Pick<WebhookTarget, 'key' | 'shown'>[]): [string[], string[]] {
  return [targets.map((t) => t.key), targets.map((t) => t.shown)];
}

export const EVENT_TYPE: Record<'completed' | 'submitFailed' | 'expired' | 'unmatched', EventType> = {
  completed: 'underwriting.completed',
  submitFailed: 'underwriting.submit_failed',
  expired: 'underwriting.expired',
  unmatched: 'callback.unmatched',
};
