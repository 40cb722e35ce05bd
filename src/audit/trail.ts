import { createHash, createHmac } from 'node:crypto';
import { type Kysely, sql } from 'kysely';
import type { SqlSnapshot } from '../db/statements.js';
import type { AuditAction, Tables } from '../db/types.js';

/** Who did it: a key's short fingerprint, or the peer when the route has no keys configured. */
export type Actor = `key:${string}` | `peer:${string}`;

/**
 * A key named by the first 12 hex digits of its SHA-256: enough to tell keys apart, never the key.
 * An operator finds which key it is with `printf %s "$KEY" | sha256sum | cut -c1-12`.
 */
export function keyFingerprint(key: string): Actor {
  return `key:${createHash('sha256').update(key).digest('hex').slice(0, 12)}`;
}

export type SubjectRef = { cpf: string } | { customerUuid: string };

/**
 * The audit's name for a data subject: an HMAC under a key derived from the first CPF_HASH_KEY, with
 * its own label, so it never equals a stored cpf_hash and names no CPF or customerUuid by itself.
 */
export function subjectHasher(cpfHashKey: string): (subject: SubjectRef) => string {
  const key = createHmac('sha256', cpfHashKey).update('underwriting-gateway/audit-subject/v1').digest();
  const mac = (kind: string, value: string) => createHmac('sha256', key).update(`${kind}:${value}`).digest('hex').slice(0, 32);
  return (subject) => ('cpf' in subject ? `cpf:${mac('cpf', subject.cpf)}` : `customer:${mac('customer', subject.customerUuid)}`);
}

export interface AuditEntry {
  at: Date;
  action: AuditAction;
  actor: Actor;
  subject: string;
  counts: Record<string, number>;
}

/** Writes one entry; pass the transaction of the work it records, so neither commits without the other. */
export async function recordAudit(db: Kysely<Tables>, entry: AuditEntry): Promise<void> {
  await db
    .insertInto('audit_log')
    .values({ at: entry.at, action: entry.action, actor: entry.actor, subject: entry.subject, counts: JSON.stringify(entry.counts) })
    .execute();
}

export interface AuditFilter {
  action?: AuditAction | undefined;
  /** Inclusive lower bound on at. */
  since?: string | undefined;
  /** Exclusive upper bound on at. */
  until?: string | undefined;
}

/** Where a page ended: the last entry's `at` (UTC text with microseconds) and id. */
export interface AuditPosition {
  t: string;
  id: number;
}

export interface AuditItem {
  at: string;
  action: AuditAction;
  actor: string;
  subject: string;
  counts: Record<string, number>;
}

const POSITION_T = sql<string>`to_char(a.at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

/** One page of the trail, newest first, by keyset on (at, id) (indexes audit_log_at, audit_log_action_at). */
export async function readAuditPage(
  db: Kysely<Tables>,
  filter: AuditFilter,
  after: AuditPosition | undefined,
  limit: number,
): Promise<{ items: AuditItem[]; next: AuditPosition | undefined }> {
  const rows = await db
    .selectFrom('audit_log as a')
    .select(['a.id', 'a.at', 'a.action', 'a.actor', 'a.subject', 'a.counts', POSITION_T.as('position_t')])
    .$if(filter.action !== undefined, (q) => q.where('a.action', '=', filter.action!))
    .$if(filter.since !== undefined, (q) => q.where(sql<boolean>`a.at >= ${filter.since}::timestamptz`))
    .$if(filter.until !== undefined, (q) => q.where(sql<boolean>`a.at < ${filter.until}::timestamptz`))
    .$if(after !== undefined, (q) => q.where(sql<boolean>`(a.at, a.id) < (${after!.t}::timestamptz, ${after!.id}::bigint)`))
    .orderBy('a.at', 'desc')
    .orderBy('a.id', 'desc')
    .limit(limit + 1)
    .execute();
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return {
    items: page.map((r) => ({ at: r.at.toISOString(), action: r.action, actor: r.actor, subject: r.subject, counts: r.counts })),
    next: rows.length > limit && last ? { t: last.position_t, id: last.id } : undefined,
  };
}

/** The trail's queries as `npm run sql:snapshot` writes them (docs/layout.md): the page unfiltered and with every filter. */
export const SQL_SNAPSHOTS: readonly SqlSnapshot[] = [
  { name: 'record_audit', run: (db) => recordAudit(db, { at: new Date(0), action: 'export', actor: 'key:0', subject: 's', counts: {} }) },
  { name: 'read_audit_page', run: (db) => readAuditPage(db, {}, undefined, 50) },
  {
    name: 'read_audit_page_filtered',
    run: (db) =>
      readAuditPage(db, { action: 'erase', since: '2026-01-01T00:00:00Z', until: '2026-01-02T00:00:00Z' }, { t: '2026-01-01T12:00:00.000000Z', id: 1 }, 50),
  },
];
