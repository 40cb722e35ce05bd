import { type Kysely, sql } from 'kysely';
import type { Test } from 'tap';
import type { Decision, RequestStatus, Tables } from '../../src/db/types.js';
import { freshDatabase, type TestDatabaseHandle } from '../helpers/database.js';
import { keyAsStored } from '../submissions/fixtures.js';

// Rows written directly, backdated as a test needs: what the submit and callback routes would have stored.

let sequence = 0;

export interface Row {
  status: RequestStatus;
  submittedAt: Date | string;
  /** Turnaround in ms: sets completed_at (and a matched callback) when status is completed. */
  turnaroundMs?: number;
  decision?: Decision;
  /** Last change; default: completed_at, else submittedAt. */
  updatedAt?: Date | string;
  customerUuid?: string;
  idempotencyKey?: string;
}

export async function insertRow(db: Kysely<Tables>, row: Row): Promise<number> {
  sequence += 1;
  const customer = row.customerUuid ?? `cust-${sequence}`;
  const submitted = new Date(row.submittedAt);
  const completed = row.status === 'completed' ? new Date(submitted.getTime() + (row.turnaroundMs ?? 1000)) : null;
  const updated = new Date(row.updatedAt ?? completed ?? submitted);
  const request = await db
    .insertInto('underwriting_requests')
    .values({
      customer_uuid: customer,
      cpf_hash: 'hash',
      cpf_masked: '***.456.789-**',
      cost_saving_enabled: false,
      status: row.status,
      submitted_at: submitted,
      updated_at: updated,
      completed_at: completed,
      decision: row.status === 'completed' ? (row.decision ?? 'approved') : null,
      // As the gateway stores a key (its digest): one stored as sent is an earlier version's, which the key-digest pass of an app started on this database rewrites.
      idempotency_key: row.idempotencyKey === undefined ? null : keyAsStored(row.idempotencyKey),
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  if (completed) {
    const decision = row.decision ?? 'approved';
    // A whole documented result, as the provider sends it, matching the decision it is stored with.
    const response = {
      approved: { costSavingEnabled: false, score: 720, riskBand: 2, limit: 5000 },
      declined: { costSavingEnabled: false, score: 410, riskBand: 5, limit: 0 },
      no_score: { costSavingEnabled: false, score: -1, riskBand: -1, limit: -1 },
      filtered: { costSavingEnabled: true, score: -1, riskBand: -1, limit: -1 },
    }[decision];
    const body = {
      customerUuid: customer,
      started: submitted.toISOString(),
      finished: completed.toISOString(),
      serviceType: 'CREDIT_SCORE',
      response,
    };
    const cb = await db
      .insertInto('callbacks')
      .values({
        received_at: completed,
        raw_body: Buffer.from(JSON.stringify(body)),
        outcome: 'matched',
        customer_uuid: customer,
        started: submitted,
        finished: completed,
        body: JSON.stringify(body),
        decision,
        request_id: request.id,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    await db.updateTable('underwriting_requests').set({ result_callback_id: cb.id }).where('id', '=', request.id).execute();
  }
  if (row.idempotencyKey) {
    await db
      .insertInto('idempotency_keys')
      .values({
        key: keyAsStored(row.idempotencyKey),
        body_hash: 'h',
        request_id: request.id,
        response_status: 202,
        response_body: '{}',
        created_at: submitted,
        expires_at: new Date(submitted.getTime() + 24 * 3600_000),
      })
      .execute();
  }
  return request.id;
}

export async function insertStray(
  db: Kysely<Tables>,
  kind: 'unmatched' | 'invalid',
  receivedAt: Date | string,
  options: { rawBody?: string | Buffer; customerUuid?: string | null; error?: string } = {},
): Promise<number> {
  sequence += 1;
  const customer = options.customerUuid === undefined ? `stray-${sequence}` : options.customerUuid;
  const received = new Date(receivedAt);
  const raw = options.rawBody ?? JSON.stringify({ customerUuid: customer, n: sequence });
  const row = await db
    .insertInto('callbacks')
    .values({
      received_at: received,
      raw_body: typeof raw === 'string' ? Buffer.from(raw) : raw,
      outcome: kind,
      error: kind === 'invalid' ? (options.error ?? 'response.score: required') : null,
      customer_uuid: customer,
      // Unmatched callbacks are valid results: their (customer, started, finished) is unique.
      started: kind === 'unmatched' ? received : null,
      finished: kind === 'unmatched' ? new Date(received.getTime() + sequence) : null,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  return row.id;
}

export async function countRows(db: Kysely<Tables>): Promise<Record<string, number>> {
  const { rows } = await sql<Record<string, number>>`
    select (select count(*) from underwriting_requests)::int as requests,
           (select count(*) from callbacks)::int as callbacks,
           (select count(*) from idempotency_keys)::int as keys,
           (select count(*) from events)::int as events,
           (select count(*) from event_deliveries)::int as deliveries`.execute(db);
  return rows[0]!;
}

export const hoursAgo = (now: Date, hours: number) => new Date(now.getTime() - hours * 3600_000);
export const daysAgo = (now: Date, days: number) => hoursAgo(now, days * 24);

/**
 * One database for a whole test file, emptied before each test: a fresh PGlite costs seconds, and
 * the tests of a file need nothing but empty tables.
 */
export async function sharedDatabase(t: Test): Promise<TestDatabaseHandle> {
  const database = await freshDatabase(t);
  t.beforeEach(async () => {
    await sql`truncate underwriting_requests, callbacks, idempotency_keys, statistics_hourly, turnaround_hourly, statistics_unfolded,
      events, event_deliveries restart identity cascade`.execute(database.db);
  });
  return database;
}

/** An outcome event as the events capability records it, with one delivery per given status. */
export async function insertEvent(
  db: Kysely<Tables>,
  e: { requestId?: number; callbackId?: number; createdAt: Date | string; deliveries?: Array<{ status: 'pending' | 'delivered' | 'dead'; queuedAt?: Date | string }> },
): Promise<number> {
  sequence += 1;
  const created = new Date(e.createdAt);
  const { rows } = await sql<{ id: number }>`
    insert into events (public_id, type, customer_uuid, created_at, request_id, callback_id, data)
    values (${`evt_${String(sequence).padStart(32, '0')}`}, ${e.requestId ? 'underwriting.completed' : 'callback.unmatched'},
            ${`cust-${sequence}`}, ${created}, ${e.requestId ?? null}, ${e.callbackId ?? null}, '{}'::jsonb)
    returning id`.execute(db);
  const id = rows[0]!.id;
  for (const [n, d] of (e.deliveries ?? []).entries()) {
    const queued = new Date(d.queuedAt ?? created);
    await sql`
      insert into event_deliveries (event_id, customer_uuid, url_key, url, status, queued_at, next_attempt_at)
      values (${id}, 'c', ${`key-${n}`}, ${`https://hooks.example/${n}`}, ${d.status}, ${queued}, ${queued})`.execute(db);
  }
  return id;
}
