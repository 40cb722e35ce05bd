import { createHash } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { SqlSnapshot } from '../db/statements.js';
import type { IdempotencyKeyRow, Tables, UnderwritingRequestRow } from '../db/types.js';
import { type KeyDigester, keyDigester } from './key-digest.js';

/** A key names one attempt for this long; after that it is as if it had never been used. */
export const IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;

/** A stored final answer, replayed as is to every later request with the same key and body. */
export interface StoredAnswer {
  statusCode: number;
  body: Record<string, unknown>;
}

/** takenOver: the key existed (expired, or abandoned by an attempt that died) and is ours now. */
export type Claim = { claimed: true; takenOver: boolean } | { claimed: false; row: IdempotencyKeyRow | undefined };

/** SHA-256 of the body as canonical JSON (keys sorted at every depth), so key order never matters. */
export function bodyHash(body: unknown): string {
  return createHash('sha256').update(canonicalJson(body)).digest('hex');
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/**
 * The form a key is stored in for this request (requests/key-digest.ts): the one an earlier
 * attempt within the key's 24 h stored it in (its digest under an earlier CPF_HASH_KEY, or the key
 * as sent, by a version before digests), else its digest now. Every later step uses that form.
 */
export async function storedKeyOf(db: Kysely<Tables>, digests: KeyDigester, key: string, now: Date): Promise<string> {
  const earlier = await storedKeyQuery(db, digests.candidates(key), now).executeTakeFirst();
  return earlier?.key ?? digests.digest(key);
}

/** storedKeyOf's statement: the newest unexpired row among a key's stored forms (by the primary key, test/db/plan-states-keys.test.ts). */
export function storedKeyQuery(db: Kysely<Tables>, forms: readonly string[], now: Date) {
  return db.selectFrom('idempotency_keys').select('key').where('key', 'in', forms).where('expires_at', '>', now).orderBy('created_at', 'desc').limit(1);
}

/**
 * Takes the key for this request, atomically across instances: a new key, an expired one, or a
 * pending one (same body) whose owner has been silent past the lease (it crashed mid-way). Any
 * other existing row is returned for the caller to judge.
 *
 * `insert: false` for a key in an earlier form (storedKeyOf: as sent, or an earlier CPF_HASH_KEY's
 * digest): its row is taken over or judged, never made anew. A row in that form that is gone (freed,
 * expired, or rewritten as its digest by the pass) is `row: undefined`, and the caller looks again:
 * making it anew would store the key as sent, and miss a row the pass moved to the digest.
 */
export async function claimKey(
  db: Kysely<Tables>,
  claim: { key: string; hash: string; now: Date; leaseMs: number; insert?: boolean },
): Promise<Claim> {
  const { key, hash, now } = claim;
  const leaseCutoff = new Date(now.getTime() - claim.leaseMs);
  const fresh = { body_hash: hash, created_at: now, expires_at: new Date(now.getTime() + IDEMPOTENCY_TTL_MS) };
  if (claim.insert !== false) {
    // A new key, or one whose 24 h are over: a fresh start.
    const taken = await db
      .insertInto('idempotency_keys')
      .values({ key, ...fresh })
      .onConflict((oc) =>
        oc
          .column('key')
          .doUpdateSet({ ...fresh, request_id: null, response_status: null, response_body: null })
          .where('idempotency_keys.expires_at', '<=', now),
      )
      .returning('key')
      .executeTakeFirst();
    if (taken) return { claimed: true, takenOver: false };
  }
  // A pending key (same body) whose owner has been silent past the lease: it died mid-way.
  const takenOver = await db
    .updateTable('idempotency_keys')
    .set({ created_at: now })
    .where('key', '=', key)
    .where('response_status', 'is', null)
    .where('body_hash', '=', hash)
    .where('created_at', '<=', leaseCutoff)
    .where('expires_at', '>', now)
    .returning('key')
    .executeTakeFirst();
  if (takenOver) return { claimed: true, takenOver: true };
  const row = await db.selectFrom('idempotency_keys').selectAll().where('key', '=', key).where('expires_at', '>', now).executeTakeFirst();
  return { claimed: false, row };
}

export async function recordAnswer(db: Kysely<Tables>, key: string, requestId: number | null, answer: StoredAnswer): Promise<void> {
  await db
    .updateTable('idempotency_keys')
    .set({ request_id: requestId, response_status: answer.statusCode, response_body: JSON.stringify(answer.body) })
    .where('key', '=', key)
    .execute();
}

/** Gives a key back when its request got no final answer (storage failed), so a retry may run it. */
export async function releaseKey(db: Kysely<Tables>, key: string): Promise<void> {
  await db.deleteFrom('idempotency_keys').where('key', '=', key).where('response_status', 'is', null).execute();
}

/** Deletes a bounded batch of expired keys; expired keys are already ignored, this only saves space. */
export async function purgeExpiredKeys(db: Kysely<Tables>, now: Date, batch = 500): Promise<void> {
  await db
    .deleteFrom('idempotency_keys')
    .where('key', 'in', (qb) => qb.selectFrom('idempotency_keys').select('key').where('expires_at', '<=', now).limit(batch))
    .execute();
}

export function storedAnswer(row: IdempotencyKeyRow): StoredAnswer | undefined {
  if (row.response_status === null || row.response_body === null) return undefined;
  return { statusCode: row.response_status, body: row.response_body };
}

/**
 * The request a key's earlier attempt stored within the key's lifetime, if any, in any form the
 * key may be stored in (KeyDigester.candidates): the key's row and its request are rewritten as
 * digests one after the other (key-digest-pass.ts), and an attempt of a version before digests
 * stored it as sent.
 */
export async function requestOfKey(
  db: Kysely<Tables>,
  keys: readonly string[],
  now: Date,
): Promise<Pick<UnderwritingRequestRow, 'id' | 'customer_uuid' | 'status' | 'upstream_status' | 'upstream_error' | 'submitted_at' | 'queued_at'> | undefined> {
  return db
    .selectFrom('underwriting_requests')
    .select(['id', 'customer_uuid', 'status', 'upstream_status', 'upstream_error', 'submitted_at', 'queued_at'])
    .where('idempotency_key', 'in', keys)
    .where('submitted_at', '>', new Date(now.getTime() - IDEMPOTENCY_TTL_MS))
    .orderBy('id', 'desc')
    .limit(1)
    .executeTakeFirst();
}

/** The key's queries as `npm run sql:snapshot` writes them (docs/layout.md). */
export const SQL_SNAPSHOTS: readonly SqlSnapshot[] = [
  { name: 'stored_key_of', run: (db) => storedKeyOf(db, keyDigester(['h']), 'k', new Date(0)) },
  { name: 'claim_key', run: (db) => claimKey(db, { key: 'k', hash: 'h', now: new Date(0), leaseMs: 1000 }) },
  { name: 'record_answer', run: (db) => recordAnswer(db, 'k', 1, { statusCode: 202, body: {} }) },
  { name: 'release_key', run: (db) => releaseKey(db, 'k') },
  { name: 'purge_expired_keys', run: (db) => purgeExpiredKeys(db, new Date(0)) },
  { name: 'request_of_key', run: (db) => requestOfKey(db, keyDigester(['h']).candidates('k'), new Date(0)) },
];
