import { type Kysely, sql } from 'kysely';
import { INDEX_LOOKUPS_ONLY } from '../db/plan-guards.js';
import type { SqlSnapshot } from '../db/statements.js';
import type { Decision, RequestStatus, StrayCallbackKind, Tables } from '../db/types.js';
import { AppError } from '../http/errors.js';
import type { EventRow } from '../events/feed-sql.js';
import { selectRequestsWithResult } from '../requests/read.js';
import { anonymousInvalidNaming, callbackOfSubject, inList, namingCpfOf, type Subject } from './subject.js';

/**
 * Tables that hold a subject's rows besides requests, callbacks and idempotency keys, each found by
 * its customer_uuid column (rows referencing them go by ON DELETE CASCADE: an event's deliveries),
 * and the count their deleted rows add to. Erasure deletes from each; a new table of personal data
 * joins with one line.
 */
export const CUSTOMER_TABLES: ReadonlyArray<{ table: string; counts: 'events' }> = [{ table: 'events', counts: 'events' }];

export interface StoredRequest {
  id: number;
  customer_uuid: string;
  status: RequestStatus;
  decision: Decision | null;
  cpf_masked: string;
  cost_saving_enabled: boolean;
  srd: Record<string, unknown> | null;
  submitted_at: Date;
  updated_at: Date;
  completed_at: Date | null;
  upstream_status: number | null;
  upstream_error: string | null;
  idempotency_key: string | null;
  result: Record<string, unknown> | null;
}

export interface StoredCallback {
  id: number;
  customer_uuid: string | null;
  /** The callback's kind (the column callbacks.outcome). */
  outcome: StrayCallbackKind;
  received_at: Date;
  body: unknown;
  error: string | null;
  raw_body: Uint8Array;
}

export interface Stored {
  requests: StoredRequest[];
  /** Unmatched and invalid callbacks; matched ones are the requests' results. */
  callbacks: StoredCallback[];
  /** Outcome events, each with its deliveries. */
  events: EventRow[];
}

const DELIVERIES = sql<EventRow['deliveries']>`(
  select jsonb_agg(jsonb_build_object(
           'url', d.url, 'status', d.status, 'attempts', d.attempts,
           'last_attempt_at', d.last_attempt_at, 'last_status', d.last_status, 'last_error', d.last_error)
         order by d.id)
  from event_deliveries d where d.event_id = e.id)`;

/**
 * Everything stored about the subject, newest first. Run it in one snapshot (repeatable read), a
 * transaction of its own: every read goes by index (INDEX_LOOKUPS_ONLY).
 */
export async function readStored(db: Kysely<Tables>, subject: Subject): Promise<Stored> {
  await INDEX_LOOKUPS_ONLY.execute(db);
  const requests = await selectRequestsWithResult(db)
    .select(['r.updated_at', 'r.upstream_error', 'r.idempotency_key'])
    .where(inList('r.customer_uuid', subject.customerUuids))
    .orderBy('r.id', 'desc')
    .execute();
  const callbacks = await db
    .selectFrom('callbacks as c')
    .select(['c.id', 'c.customer_uuid', 'c.outcome', 'c.received_at', 'c.body', 'c.error', 'c.raw_body', 'c.cpf_hashes'])
    .where((eb) =>
      eb.or([
        eb.and([eb('c.outcome', 'in', ['unmatched', 'invalid']), inList('c.customer_uuid', subject.customerUuids)]),
        namingCpfOf('c', subject),
        anonymousInvalidNaming('c', subject.needles),
      ]),
    )
    .orderBy('c.id', 'desc')
    .execute()
    .then((rows) => rows.filter((c) => callbackOfSubject(c, subject)));
  const events = await db
    .selectFrom('events as e')
    .select(['e.id', 'e.public_id', 'e.type', 'e.created_at', sql<string>`e.tx_id::text`.as('tx_id'), 'e.data', DELIVERIES.as('deliveries')])
    .where(inList('e.customer_uuid', subject.customerUuids))
    .orderBy('e.id', 'desc')
    .execute();
  return { requests: requests as StoredRequest[], callbacks: callbacks as StoredCallback[], events };
}

export interface ErasedCounts {
  requests: number;
  callbacks: number;
  events: number;
  idempotencyKeys: number;
}

export const inFlight = () =>
  new AppError(409, 'in_flight', 'a request of this subject awaits its callback; erase it once the request completes or expires');

/**
 * Deletes every row of the subject, inside the caller's transaction. Throws 409 in_flight (the
 * caller's transaction then rolls back, nothing erased) while one of its requests awaits a callback.
 */
export async function eraseStored(tx: Kysely<Tables>, subject: Subject): Promise<ErasedCounts> {
  // Every statement below goes by index. Without the guard, the callbacks' four arms (a bitmap of
  // four indexes, one a GIN) looked dearer than reading a small table whole: a plan that then grows
  // with the table (test/db/plan-states-writes.test.ts).
  await INDEX_LOOKUPS_ONLY.execute(tx);
  // Locked so that no callback completes (and no expiry moves) one of them while we decide.
  const requests = await tx
    .selectFrom('underwriting_requests')
    .select(['id', 'status', 'idempotency_key'])
    .where(inList('customer_uuid', subject.customerUuids))
    .orderBy('id')
    .forUpdate()
    .execute();
  if (requests.some((r) => r.status === 'submitting' || r.status === 'submitted')) throw inFlight();
  const ids = requests.map((r) => r.id);
  // The subject's callbacks: its requests', those naming its customerUuids, those that kept a hash of
  // its CPF, and invalid ones naming no customer whose bytes name it (found by position(), each match
  // then checked whole by callbackOfSubject). Found in one statement, each arm by its index (a bitmap of four), and
  // deleted below by id: a delete by the first two arms alone was a sequential scan of callbacks
  // for a planner that thought the table small (test/db/plan-states-writes.test.ts).
  const { rows: found } = await sql<{ id: number; customer_uuid: string | null; outcome: string; raw_body: Uint8Array | null; cpf_hashes: string[] | null }>`
    select c.id, c.customer_uuid, c.outcome, c.cpf_hashes,
           -- The bytes only where they decide (callbackOfSubject): an invalid callback naming no customer.
           case when c.outcome = 'invalid' and c.customer_uuid is null then c.raw_body end as raw_body
      from callbacks c
     where ${inList('c.request_id', ids)}
        or (c.request_id is null and ${inList('c.customer_uuid', subject.customerUuids)})
        or ${namingCpfOf('c', subject)}
        or ${anonymousInvalidNaming('c', subject.needles)}`.execute(tx);
  const callbackIds = found.filter((c) => callbackOfSubject(c, subject)).map((c) => Number(c.id));
  const keys = requests.flatMap((r) => (r.idempotency_key === null ? [] : [r.idempotency_key]));

  const beyond = { events: 0 };
  // The events of its requests and callbacks, whoever they name (a callback found by the CPF its
  // bytes held may name another customerUuid): nothing cascades from a request to its events
  // (migration 0027), and the cascade from a callback is kept only for the version before's
  // erasures during a rolling deploy. Each by its index (events_request, events_callback); the
  // deliveries go by cascade.
  for (const [column, values] of [['request_id', ids], ['callback_id', callbackIds]] as const) {
    const { numAffectedRows } = await sql`delete from events where ${inList(column, values)}`.execute(tx);
    beyond.events += Number(numAffectedRows ?? 0);
  }
  for (const { table, counts } of CUSTOMER_TABLES) {
    const { numAffectedRows } = await sql`delete from ${sql.table(table)} where ${inList('customer_uuid', subject.customerUuids)}`.execute(tx);
    beyond[counts] += Number(numAffectedRows ?? 0);
  }

  // A key's row goes with its request; a key the subject used that got no request of its own
  // (answered 409 in_flight) holds a hash of the body, which carries the CPF. Never a pending key
  // (no answer yet): it is a submit in progress, and a key string past its 24 h may be another
  // customer's now; deleting it would let that submit's retry reach the provider a second time.
  const deletedKeys = await tx
    .deleteFrom('idempotency_keys')
    .where((eb) =>
      eb.or([inList('request_id', ids), eb.and([eb('request_id', 'is', null), eb('response_status', 'is not', null), inList('key', keys)])]),
    )
    .executeTakeFirst();

  // Requests and callbacks refer to each other (result_callback_id, request_id): one statement
  // deletes both. A callback of another request (one submitted since we looked) is left alone.
  const { rows } = await sql<{ requests: number; callbacks: number }>`
    with gone_callbacks as (
      delete from callbacks c where ${inList('c.id', callbackIds)}
      returning c.id
    ),
    gone_requests as (
      delete from underwriting_requests r where ${inList('r.id', ids)} returning r.id
    )
    select (select count(*) from gone_requests)::int as requests, (select count(*) from gone_callbacks)::int as callbacks`.execute(tx);
  const counts = rows[0]!;
  return {
    requests: Number(counts.requests),
    callbacks: Number(counts.callbacks),
    events: beyond.events,
    idempotencyKeys: Number(deletedKeys.numDeletedRows),
  };
}

/** A subject with rows of each kind: every condition in its full form (no `false` for an empty list). */
const SUBJECT: Subject = { customerUuids: ['customer-0001', 'customer-0002'], needles: ['customer-0001', 'customer-0002'], cpfHashes: ['h1', 'h2'], hashedCallbacks: 'any' };

/** The subject's export and erasure as `npm run sql:snapshot` writes them (docs/layout.md). */
export const SQL_SNAPSHOTS: readonly SqlSnapshot[] = [
  { name: 'read_stored', run: (db) => readStored(db, SUBJECT) },
  {
    name: 'erase_stored',
    rows: [[], [{ id: 1, status: 'completed', idempotency_key: 'k' }], [{ id: 2, customer_uuid: null, outcome: 'invalid', raw_body: Buffer.from('x customer-0001 y'), cpf_hashes: null }], [], [], [], [], [{ requests: 1, callbacks: 1 }]],
    run: (db) => db.transaction().execute((tx) => eraseStored(tx, SUBJECT)),
  },
];
