import { type Kysely, sql } from 'kysely';
import type { SubjectRef } from '../audit/trail.js';
import { formatCpf, hashCpfUnderEvery } from '../cpf.js';
import type { SqlSnapshot } from '../db/statements.js';
import type { Tables } from '../db/types.js';

/** Everything that identifies a data subject's rows. */
export interface Subject {
  /**
   * The customerUuids whose rows are the subject's: the one given, or every one that a request
   * with the CPF (under any configured key) carries.
   */
  customerUuids: string[];
  /**
   * Text whose presence in the raw bytes of an invalid callback naming no customer ties it to the
   * subject: the CPF (digits and formatted) and the customerUuids long enough not to match by chance.
   */
  needles: string[];
  /**
   * The keyed hashes of the subject's CPF (under every configured key): a callback that completes no
   * request whose bytes held the CPF keeps them (callbacks.cpf_hashes, migration 0026). By customerUuid:
   * the hashes its requests were stored with.
   */
  cpfHashes: string[];
  /**
   * Which callbacks holding those hashes are the subject's: by CPF, any (the person, whatever
   * customer a callback names); by customerUuid, only those naming no customer (one naming another
   * customerUuid of the same person is that customer's, and stays).
   */
  hashedCallbacks: 'any' | 'naming-no-customer';
}

/** Shorter customerUuids ("42") would match unrelated bytes; they tie only callbacks that name them. */
export const MIN_NEEDLE_LENGTH = 8;

export async function resolveSubject(db: Kysely<Tables>, ref: SubjectRef, cpfHashKeys: readonly string[]): Promise<Subject> {
  if ('customerUuid' in ref) {
    const hashes = await db
      .selectFrom('underwriting_requests')
      .select('cpf_hash')
      .distinct()
      .where('customer_uuid', '=', ref.customerUuid)
      .orderBy('cpf_hash')
      .execute();
    return {
      customerUuids: [ref.customerUuid],
      needles: longEnough([ref.customerUuid]),
      cpfHashes: hashes.map((h) => h.cpf_hash),
      hashedCallbacks: 'naming-no-customer',
    };
  }
  const cpfHashes = hashCpfUnderEvery(ref.cpf, cpfHashKeys);
  const rows = await db
    .selectFrom('underwriting_requests')
    .select('customer_uuid')
    .distinct()
    .where('cpf_hash', 'in', cpfHashes)
    .orderBy('customer_uuid')
    .execute();
  const customerUuids = rows.map((r) => r.customer_uuid);
  return { customerUuids, needles: [ref.cpf, formatCpf(ref.cpf), ...longEnough(customerUuids)], cpfHashes, hashedCallbacks: 'any' };
}

function longEnough(values: string[]): string[] {
  return values.filter((v) => v.length >= MIN_NEEDLE_LENGTH);
}

/** `column in (values)`, or false for no values (an empty IN list is a syntax error). */
export function inList(column: string, values: readonly (string | number)[]) {
  if (values.length === 0) return sql<boolean>`false`;
  return sql<boolean>`${sql.ref(column)} in (${sql.join(values)})`;
}

/** An invalid callback naming no customer whose raw bytes contain one of the needles. */
export function anonymousInvalidNaming(alias: string, needles: readonly string[]) {
  if (needles.length === 0) return sql<boolean>`false`;
  return sql<boolean>`(${sql.ref(`${alias}.outcome`)} = 'invalid' and ${sql.ref(`${alias}.customer_uuid`)} is null
    and exists (select 1 from json_array_elements_text(${JSON.stringify(needles)}::json) as n(v)
                where position(convert_to(n.v, 'UTF8') in ${sql.ref(`${alias}.raw_body`)}) > 0))`;
}

/**
 * A callback that completes no request whose bytes held one of the subject's CPFs (masked there, kept
 * as hashes): through callbacks_cpf_hashes, which holds only such callbacks.
 */
export function namingCpfOf(alias: string, subject: Pick<Subject, 'cpfHashes' | 'hashedCallbacks'>) {
  if (subject.cpfHashes.length === 0) return sql<boolean>`false`;
  const column = sql.ref(`${alias}.cpf_hashes`);
  const holds = sql<boolean>`${column} is not null and ${column} && ${sql.val([...subject.cpfHashes])}::text[]`;
  return subject.hashedCallbacks === 'any' ? sql<boolean>`(${holds})` : sql<boolean>`(${holds} and ${sql.ref(`${alias}.customer_uuid`)} is null)`;
}

/** The bytes a customerUuid is made of (letters, digits, '-', '_'). */
const isIdByte = (b: number | undefined) =>
  b !== undefined && ((b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a) || b === 0x2d || b === 0x5f);

/**
 * Whether the raw bytes of an invalid callback naming no customer name the subject: a CPF form
 * anywhere, a customerUuid only as a whole identifier (no letter, digit, '-' or '_' either side),
 * so that "cust-0001" never takes a callback of "cust-00012". The SQL's position() is the prefilter.
 */
export function rawNamesSubject(raw: Uint8Array, subject: Subject): boolean {
  const bytes = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
  for (const needle of subject.needles) {
    const whole = subject.customerUuids.includes(needle);
    const n = Buffer.from(needle, 'utf8');
    for (let i = bytes.indexOf(n); i >= 0; i = bytes.indexOf(n, i + 1)) {
      if (!whole || (!isIdByte(bytes[i - 1]) && !isIdByte(bytes[i + n.length]))) return true;
    }
  }
  return false;
}

/**
 * Whether a callback found by the subject's arms (its requests', its customerUuids', one that kept a
 * hash of its CPF, an invalid one naming no customer whose bytes hold a needle) is the subject's: all
 * are but the last, which must name it in its raw bytes as rawNamesSubject reads them. The export and the erasure both ask this.
 */
export function callbackOfSubject(
  c: { customer_uuid: string | null; outcome: string; raw_body: Uint8Array | null; cpf_hashes: string[] | null },
  subject: Subject,
): boolean {
  const holdsCpf = c.cpf_hashes?.some((h) => subject.cpfHashes.includes(h)) === true;
  if (holdsCpf && (subject.hashedCallbacks === 'any' || c.customer_uuid === null)) return true;
  return c.customer_uuid !== null || c.outcome !== 'invalid' || (c.raw_body !== null && rawNamesSubject(c.raw_body, subject));
}

/** The subject's lookup by CPF as `npm run sql:snapshot` writes it (docs/layout.md); by customerUuid it reads nothing. */
export const SQL_SNAPSHOTS: readonly SqlSnapshot[] = [
  // A made-up CPF (valid check digits): a parameter, never in the text.
  { name: 'resolve_subject_by_cpf', run: (db) => resolveSubject(db, { cpf: '52998224725' }, ['k1', 'k2']) },
  { name: 'resolve_subject_by_customer', run: (db) => resolveSubject(db, { customerUuid: 'customer-0001' }, ['k1']) },
];
