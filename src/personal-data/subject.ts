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
}

/** Shorter customerUuids ("42") would match unrelated bytes; they tie only callbacks that name them. */
export const MIN_NEEDLE_LENGTH = 8;

export async function resolveSubject(db: Kysely<Tables>, ref: SubjectRef, cpfHashKeys: readonly string[]): Promise<Subject> {
  if ('customerUuid' in ref) {
    return { customerUuids: [ref.customerUuid], needles: longEnough([ref.customerUuid]) };
  }
  const rows = await db
    .selectFrom('underwriting_requests')
    .select('customer_uuid')
    .distinct()
    .where('cpf_hash', 'in', hashCpfUnderEvery(ref.cpf, cpfHashKeys))
    .orderBy('customer_uuid')
    .execute();
  const customerUuids = rows.map((r) => r.customer_uuid);
  return { customerUuids, needles: [ref.cpf, formatCpf(ref.cpf), ...longEnough(customerUuids)] };
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
 * Whether a callback found by the subject's arms (its requests', its customerUuids', an invalid one
 * naming no customer whose bytes hold a needle) is the subject's: all are but the last, which must
 * name it in its raw bytes as rawNamesSubject reads them. The export and the erasure both ask this.
 */
export function callbackOfSubject(c: { customer_uuid: string | null; outcome: string; raw_body: Uint8Array | null }, subject: Subject): boolean {
  return c.customer_uuid !== null || c.outcome !== 'invalid' || (c.raw_body !== null && rawNamesSubject(c.raw_body, subject));
}

/** The subject's lookup by CPF as `npm run sql:snapshot` writes it (docs/layout.md); by customerUuid it reads nothing. */
export const SQL_SNAPSHOTS: readonly SqlSnapshot[] = [
  // A made-up CPF (valid check digits): a parameter, never in the text.
  { name: 'resolve_subject_by_cpf', run: (db) => resolveSubject(db, { cpf: '52998224725' }, ['k1', 'k2']) },
];
