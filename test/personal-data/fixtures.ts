import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { FastifyInstance } from 'fastify';
import { type Kysely, sql } from 'kysely';
import type { Test } from 'tap';
import { maskCpf } from '../../src/cpf.js';
import type { Tables } from '../../src/db/types.js';
import { buildTestApp, type TestApp, type TestAppOptions } from '../helpers/app.js';
import type { TestDatabaseHandle } from '../helpers/database.js';
import { insertRequest, insertUnmatched, distinctResult } from '../queries/fixtures.js';
import { keyAsStored } from '../submissions/fixtures.js';

export const ADMIN_KEY = 'admin-key-0123456789abcdef';
export const SECOND_ADMIN_KEY = 'admin-key-two-0123456789abcdef';

/** The gateway with admin keys configured (plus whatever the test adds). */
export function adminApp(t: Test, options: TestAppOptions = {}): Promise<TestApp> {
  return buildTestApp(t, { ...options, env: { ADMIN_API_KEYS: `${ADMIN_KEY},${SECOND_ADMIN_KEY}`, ...options.env } });
}

/** POST with a JSON body and, unless told otherwise, the admin key. */
export function post(app: FastifyInstance, url: string, body: unknown, key: string | null = ADMIN_KEY) {
  return app.inject({
    method: 'POST',
    url,
    payload: body as Record<string, unknown>,
    headers: key === null ? {} : { authorization: `Bearer ${key}` },
  });
}

export function get(app: FastifyInstance, url: string, key: string | null = ADMIN_KEY) {
  return app.inject({ method: 'GET', url, headers: key === null ? {} : { authorization: `Bearer ${key}` } });
}

/**
 * A subject with one of everything: an older expired request and a newer completed one with its
 * result, an idempotency key, an unmatched callback, an invalid callback naming the customer whose
 * raw bytes carry the CPF, and two events (completed, unmatched) with a dead delivery each.
 */
export async function seedSubject(db: Kysely<Tables>, customerUuid: string, cpf: string): Promise<void> {
  await insertRequest(db, {
    customerUuid,
    cpf,
    status: 'expired',
    submittedAt: '2026-01-01T10:00:00Z',
    srd: { grossIncome: 4100, address: { street: 'Rua Augusta', number: '1500', city: 'São Paulo', state: 'SP' } },
  });
  const completed = await insertRequest(db, {
    customerUuid,
    cpf,
    submittedAt: '2026-01-02T10:00:00Z',
    srd: { grossIncome: 8000, occupation: 'Retired' },
    result: distinctResult(customerUuid, { limit: 7000 }),
  });
  await db
    .updateTable('underwriting_requests')
    .set({ idempotency_key: keyAsStored(`idem-${customerUuid}`) })
    .where('id', '=', completed)
    .execute();
  await db
    .insertInto('idempotency_keys')
    .values({
      key: keyAsStored(`idem-${customerUuid}`),
      body_hash: 'b'.repeat(64),
      request_id: completed,
      response_status: 202,
      response_body: JSON.stringify({ customerUuid, status: 'submitted', submittedAt: '2026-01-02T10:00:00.000Z', upstreamStatus: 202 }),
      expires_at: new Date(Date.now() + 3600_000),
    })
    .execute();
  await insertUnmatched(db, distinctResult(customerUuid, { limit: 0 }));
  await insertInvalid(db, { customerUuid, raw: `{"customerUuid":"${customerUuid}","cpf":"${cpf}","started":"yesterday"}` });
  await insertEvent(db, { customerUuid, requestId: completed, cpf });
  await insertEvent(db, { customerUuid, requestId: null, cpf });
}

let events = 0;

/** An outcome event with one delivery, as the events capability records it. */
export async function insertEvent(db: Kysely<Tables>, e: { customerUuid: string; requestId: number | null; cpf: string }): Promise<void> {
  events += 1;
  const type = e.requestId === null ? 'callback.unmatched' : 'underwriting.completed';
  const data =
    e.requestId === null
      ? { customerUuid: e.customerUuid, receivedAt: '2026-01-02T10:00:05.000Z', result: null }
      : {
          customerUuid: e.customerUuid,
          status: 'completed',
          decision: 'declined',
          cpfMasked: maskCpf(e.cpf),
          costSavingEnabled: false,
          srd: { grossIncome: 8000, occupation: 'Retired' },
          submittedAt: '2026-01-02T10:00:00.000Z',
          completedAt: '2026-01-02T10:00:05.000Z',
          upstreamStatus: 202,
          result: distinctResult(e.customerUuid, { limit: 0 }),
        };
  const event = await db
    .insertInto('events')
    .values({
      public_id: `evt_${events.toString(16).padStart(32, '0')}`,
      type,
      customer_uuid: e.customerUuid,
      created_at: '2026-01-02T10:00:05Z',
      request_id: e.requestId,
      data: JSON.stringify(data),
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  const now = new Date('2026-01-02T10:00:06Z');
  await db
    .insertInto('event_deliveries')
    .values({
      event_id: event.id,
      customer_uuid: e.customerUuid,
      url_key: 'k'.repeat(16),
      url: 'https://hooks.internal/outcomes',
      status: 'dead',
      attempts: 3,
      queued_at: now,
      next_attempt_at: now,
      last_attempt_at: now,
      last_status: 500,
      last_error: `HTTP 500: rejected ${e.customerUuid}`,
    })
    .execute();
}

/** An invalid callback as the callback route keeps it: raw bytes, why, and the customer when recognisable. */
export async function insertInvalid(db: Kysely<Tables>, cb: { customerUuid: string | null; raw: string }): Promise<void> {
  let body: string | null = null;
  try {
    body = JSON.stringify(JSON.parse(cb.raw));
  } catch {
    // not JSON: only the raw bytes are kept
  }
  await db
    .insertInto('callbacks')
    .values({
      raw_body: Buffer.from(cb.raw),
      outcome: 'invalid',
      error: 'started: must be an ISO 8601 date-time',
      customer_uuid: cb.customerUuid,
      body,
      peer: '127.0.0.1',
    })
    .execute();
}

/** Rows per table, to show what an operation left alone. */
export async function rowCounts(db: Kysely<Tables>): Promise<Record<string, number>> {
  const { rows } = await sql<{ requests: number; callbacks: number; keys: number; audit: number; events: number; deliveries: number }>`
    select (select count(*) from underwriting_requests)::int as requests, (select count(*) from callbacks)::int as callbacks,
           (select count(*) from idempotency_keys)::int as keys, (select count(*) from audit_log)::int as audit,
           (select count(*) from events)::int as events, (select count(*) from event_deliveries)::int as deliveries`.execute(db);
  return { ...rows[0]! };
}

/**
 * The whole database as text: pg_dump of the test's own database on PostgreSQL, and on either engine
 * every row of every table read as text (bytea as hex, as pg_dump writes it).
 */
export async function dumpDatabase(database: TestDatabaseHandle): Promise<string> {
  const parts: string[] = [];
  if (database.url) {
    const { stdout } = await promisify(execFile)('pg_dump', ['--no-owner', '--dbname', database.url], { maxBuffer: 256 * 1024 * 1024 });
    parts.push(stdout);
  }
  const { rows: tables } = await sql<{ table_name: string }>`
    select table_name from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE'`.execute(database.db);
  for (const { table_name } of tables) {
    const { rows } = await sql<{ row: string }>`select t::text as row from ${sql.table(table_name)} t`.execute(database.db);
    parts.push(...rows.map((r) => r.row));
  }
  return parts.join('\n');
}

/** The forms a text takes in a dump: as it is, and as the hex of its bytes inside a bytea. */
export function dumpForms(text: string): string[] {
  return [text, Buffer.from(text).toString('hex')];
}
