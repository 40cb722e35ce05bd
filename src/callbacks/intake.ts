import type { ValidationIssue } from '../http/errors.js';
import { issuePath } from '../http/errors.js';
import { customerUuidIsCpf } from '../cpf.js';
import { scrubText } from '../observability/scrub.js';
import { customerUuidSchema, type UnderwritingResult, underwritingResultSchema, UNSTORABLE_TEXT } from '../provider/schemas.js';
import { mapJsonText } from './json-text.js';

/** What a callback's bytes turned out to be: a result to store, or why it is not one. */
export type Intake =
  | { valid: true; result: UnderwritingResult; json: string }
  | {
      valid: false;
      issues: ValidationIssue[];
      /** One line for the callbacks.error column. */
      error: string;
      /** The body as jsonb text when it was JSON at all, for whoever inspects it later. */
      json: string | null;
      /** Kept when recognisable, so an invalid callback can still be found by customer. */
      customerUuid: string | null;
    };

const BOM = '\uFEFF';
/** What PostgreSQL's text and jsonb refuse (provider/schemas.ts), every occurrence. */
const UNSTORABLE = new RegExp(UNSTORABLE_TEXT.source, 'g');

export interface IntakeOptions {
  /** CUSTOMER_UUID_ALLOW_CPF: off, no request of ours has a CPF for customerUuid, and a callback naming one is invalid. */
  customerUuidAllowCpf: boolean;
}

const CPF_AS_CUSTOMER: ValidationIssue = {
  path: 'customerUuid',
  message: 'is a CPF, which no request of this gateway has as customerUuid (CUSTOMER_UUID_ALLOW_CPF is off): kept as invalid, never shown, logged or pushed',
};

/**
 * Reads a callback body, exactly the bytes received, into a validated result or a list of issues.
 * An invalid body's jsonb copy is read from `masked` (callbacks/kept-body.ts) when that masked a CPF:
 * none when the masking left no JSON (a CPF written as a number).
 */
export function readCallback(raw: Buffer, options: IntakeOptions, masked: string | null = null): Intake {
  if (raw.length === 0) return invalid([{ path: '', message: 'the body is empty' }], null, null);
  let text = raw.toString('utf8');
  // The provider's encoding is not documented: a UTF-8 byte order mark is tolerated, not refused.
  if (text.startsWith(BOM)) text = text.slice(1);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    return invalid([{ path: '', message: `not JSON: ${(err as Error).message}` }], null, null);
  }
  const checked = underwritingResultSchema.safeParse(parsed);
  if (!checked.success) {
    const issues = checked.error.issues.map((i) => ({ path: issuePath(i.path), message: i.message }));
    // A customerUuid that is a CPF (and may not be one) keeps even the jsonb copy out: raw bytes only.
    const keepsJson = options.customerUuidAllowCpf || !namesCpfAsCustomer(parsed);
    return invalid(issues, keepsJson ? maskedJson(parsed, text, masked) : null, recognisableCustomer(parsed, options));
  }
  // Its raw bytes are the evidence (the CPF masked there, its hash kept: an erasure of that CPF finds it); no jsonb copy, no customer key.
  if (!options.customerUuidAllowCpf && customerUuidIsCpf(checked.data.customerUuid)) return invalid([CPF_AS_CUSTOMER], null, null);
  // Only the provider's documented fields go into `result`: anything else it sends (a CPF, say)
  // stays in raw_body, the evidence, and is never served back.
  const json = storableJson(documentedResult(checked.data), text);
  if (json === null) return invalid([{ path: '', message: 'the body cannot be stored as JSON' }], null, checked.data.customerUuid);
  return { valid: true, result: checked.data, json };
}

/** The documented fields of a result, nothing else (the schema lets unknown fields through). */
export function documentedResult(result: UnderwritingResult): UnderwritingResult {
  const { customerUuid, started, finished, serviceType, response } = result;
  const { costSavingEnabled, score, riskBand, limit } = response;
  return { customerUuid, started, finished, serviceType, response: { costSavingEnabled, score, riskBand, limit } };
}

function invalid(issues: ValidationIssue[], json: string | null, customerUuid: string | null): Intake {
  // A parser message may quote the body (JSON.parse's does), and a path may be a field the body
  // named: NUL included, which a PostgreSQL text column refuses, or a CPF. Scrubbed for the row,
  // the answer and the log alike.
  const shown = issues.map((i) => ({ path: scrubText(i.path), message: scrubText(i.message) }));
  const error = shown.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join('; ').replace(UNSTORABLE, '\uFFFD');
  return { valid: false, issues: shown, error, json, customerUuid };
}

/** The jsonb copy of what was parsed, read again from the masked text when a CPF was masked. */
function maskedJson(parsed: unknown, text: string, masked: string | null): string | null {
  if (masked === null) return storableJson(parsed, text);
  const maskedText = masked.startsWith(BOM) ? masked.slice(1) : masked;
  try {
    return storableJson(JSON.parse(maskedText), maskedText);
  } catch {
    return null;
  }
}

function namesCpfAsCustomer(parsed: unknown): boolean {
  const candidate = typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>).customerUuid : undefined;
  return typeof candidate === 'string' && customerUuidIsCpf(candidate);
}

function recognisableCustomer(parsed: unknown, options: IntakeOptions): string | null {
  if (typeof parsed !== 'object' || parsed === null) return null;
  const candidate = (parsed as Record<string, unknown>).customerUuid;
  if (!customerUuidSchema.safeParse(candidate).success) return null;
  return !options.customerUuidAllowCpf && customerUuidIsCpf(candidate as string) ? null : (candidate as string);
}

/**
 * JSON text that PostgreSQL's jsonb accepts. jsonb refuses \u0000 and lone surrogates, which only
 * an escape in the original text can produce; those are replaced by U+FFFD in this copy (raw_body
 * keeps the original). Null when even that fails (e.g. nesting too deep to serialise).
 */
export function storableJson(value: unknown, sourceText: string): string | null {
  try {
    return JSON.stringify(sourceText.includes('\\u') ? replaceUnstorable(value) : value);
  } catch {
    return null;
  }
}

function replaceUnstorable(value: unknown): unknown {
  return mapJsonText(value, (text) => text.replace(UNSTORABLE, '\uFFFD'));
}
