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
    'submittedAt', case when ${r}.status in ('queued', 'cancelled') then null else ${isoSql(`${r}.submitted_at`)} end, 'completedAt', ${isoSql(`${r}.completed_at`)},
    'upstreamStatus', ${r}.upstream_status, 'result', ${result})`;
}

/** callback.unmatched's data, from a callbacks row aliased `c`. */
export function unmatchedDataSql(c: string): string {
  return `jsonb_build_object('customerUuid', ${c}.customer_uuid, 'receivedAt', ${isoSql(`${c}.received_at`)}, 'result', ${c}.body)`;
}

/**
 * A new event's public id: evt_ and 32 hex digits, the first 12 the milliseconds since 1970 when the
 * row is made (as a UUIDv7 begins), the other 20 random (80 bits, from a random UUID through md5).
 * Time first, so that new ids land at the right edge of events_public_id_key, as the serial keys'
 * do: with random ids every insert wrote to a leaf anywhere in that index, and at a million events
 * most of those leaves were written whole to the WAL again after every checkpoint (docs/performance.md).
 */
const NEW_EVENT_ID_SQL = `'evt_' || lpad(to_hex((extract(epoch from clock_timestamp()) * 1000)::bigint), 12, '0') || substr(md5(gen_random_uuid()::text), 1, 20)`;

/**
 * A CTE that inserts one event per row of `source` (columns: type, customer_uuid, created_at,
 * request_id, callback_id, data; with `origin`, also traceparent and x_request_id, which every
 * pushed attempt of the event carries). Append after the statement's own CTEs, with a leading comma.
 * Its deliveries are not written here: the delivery worker writes them from the feed afterwards
 * (see dispatchDeliveries), so that the change's own statement carries no delivery write.
 */
export function recordEventsSql(source: string, options: { origin?: boolean } = {}): string {
  const origin = options.origin === true;
  return `
    new_events as (
      insert into events (public_id, type, customer_uuid, created_at, request_id, callback_id, data${origin ? ', traceparent, x_request_id' : ''})
      select ${NEW_EVENT_ID_SQL}, s.type, s.customer_uuid, s.created_at,
             s.request_id, s.callback_id, s.data${origin ? ', s.traceparent, s.x_request_id' : ''}
      from ${source} s
      order by s.customer_uuid
      returning id
    )`;
}

/**
 * The CTEs that record one event of `type` per request returned by the CTE `changed` (its rows are
 * REQUEST_DATA_COLUMNS; no result body): the state change and its event in one statement. Append
 * after the statement's own CTEs, with a leading comma.
 */
export function requestEventsSql(type: EventType, changed: string): string {
  return `event_source as (
      select '${type}' as type, r.customer_uuid, r.updated_at as created_at,
             r.id as request_id, null::bigint as callback_id, ${requestDataSql('r', 'null::jsonb')} as data,
             r.traceparent, r.x_request_id
      from ${changed} r
    ),
    ${recordEventsSql('event_source', { origin: true })}`;
}

/** An event as pushed: the body every attempt sends, from a new_events (or events) row aliased `e`. */
export function eventBodySql(e: string): string {
  return `json_build_object('id', ${e}.public_id, 'type', ${e}.type, 'timestamp', ${isoSql(`${e}.created_at`)}, 'data', ${e}.data)::text`;
}

/** Targets as two text[] parameters: their keys and their shown URLs. */
export function targetParameters(targets: readonly Pick<WebhookTarget, 'key' | 'shown'>[]): [string[], string[]] {
  return [targets.map((t) => t.key), targets.map((t) => t.shown)];
}

export const EVENT_TYPE: Record<'completed' | 'submitFailed' | 'expired' | 'unmatched' | 'queued' | 'submitted' | 'cancelled', EventType> = {
  queued: 'underwriting.queued',
  submitted: 'underwriting.submitted',
  cancelled: 'underwriting.cancelled',
  completed: 'underwriting.completed',
  submitFailed: 'underwriting.submit_failed',
  expired: 'underwriting.expired',
  unmatched: 'callback.unmatched',
};
