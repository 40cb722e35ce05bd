import type { Kysely } from 'kysely';
import { runStatement, type Statement } from '../db/database.js';
import type { DB, Decision } from '../db/types.js';

/** What is known about any callback the moment it arrives. */
export interface Arrival {
  receivedAt: Date;
  peer: string | null;
  /** Exactly the bytes received. */
  rawBody: Buffer;
}

export interface ValidResult extends Arrival {
  customerUuid: string;
  /** ISO 8601 with a zone, as sent: PostgreSQL keeps microseconds a JS Date would drop. */
  started: string;
  finished: string;
  /** The body as jsonb text. */
  body: string;
  decision: Decision;
}

export type Recorded =
  | { outcome: 'matched'; callbackId: number; requestId: number; submittedAt: Date; decision: Decision }
  | { outcome: 'unmatched'; callbackId: number }
  | { outcome: 'duplicate' };

interface RecordedRow {
  id: number;
  request_id: number | null;
  submitted_at: Date | string | null;
}

/**
 * Stores a valid result, deduplicates and correlates it in ONE statement (one round trip, atomic):
 * lock the newest request of the customer still without a result, insert the callback unless the
 * same (customerUuid, started, finished) is already stored, and complete the request from what was
 * inserted. Concurrent copies queue on the request's row lock or on the unique index; exactly one
 * inserts. (The NOTIFY is sent after the commit, by the announcer: see announcer.ts for why.)
 */
const RECORD_RESULT: Statement = {
  name: 'record_result',
  text: `
    with target as materialized (
      select id from underwriting_requests
      where customer_uuid = $1::text and result_callback_id is null
      order by id desc
      limit 1
      for update
    ),
    inserted as (
      insert into callbacks
        (received_at, peer, raw_body, outcome, customer_uuid, started, finished, body, decision, request_id)
      values (
        $2::timestamptz, $3::text, $4::bytea,
        case when exists (select 1 from target) then 'matched' else 'unmatched' end,
        $1::text, $5::timestamptz, $6::timestamptz,
        $7::jsonb, $8::text, (select id from target)
      )
      on conflict (customer_uuid, started, finished) do nothing
      returning id, request_id
    ),
    completed as (
      update underwriting_requests r
      set status = 'completed', completed_at = $2::timestamptz, updated_at = $2::timestamptz,
          result_callback_id = inserted.id, decision = $8::text
      from inserted
      where r.id = inserted.request_id
      returning r.submitted_at
    )
    select inserted.id, inserted.request_id, completed.submitted_at
    from inserted left join completed on true`,
};

export async function recordResult(db: Kysely<DB>, cb: ValidResult): Promise<Recorded> {
  const at = cb.receivedAt.toISOString();
  // A prepared statement: planned once per connection instead of on every callback.
  const rows = await runStatement<RecordedRow>(db, RECORD_RESULT, [
    cb.customerUuid,
    at,
    cb.peer,
    cb.rawBody,
    cb.started,
    cb.finished,
    cb.body,
    cb.decision,
  ]);
  const row = rows[0];
  if (row === undefined) return { outcome: 'duplicate' };
  if (row.request_id === null || row.submitted_at === null) return { outcome: 'unmatched', callbackId: row.id };
  return {
    outcome: 'matched',
    callbackId: row.id,
    requestId: row.request_id,
    submittedAt: new Date(row.submitted_at),
    decision: cb.decision,
  };
}

export interface InvalidCallback extends Arrival {
  error: string;
  customerUuid: string | null;
  body: string | null;
}

/** Keeps a callback that is not a valid result: the raw bytes and why, for a human to look at. */
export async function recordInvalid(db: Kysely<DB>, cb: InvalidCallback): Promise<number> {
  const row = await db
    .insertInto('callbacks')
    .values({
      received_at: cb.receivedAt,
      peer: cb.peer,
      raw_body: cb.rawBody,
      outcome: 'invalid',
      error: cb.error,
      customer_uuid: cb.customerUuid,
      body: cb.body,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  return row.id;
}
