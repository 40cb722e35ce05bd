import type { z } from 'zod';
import { maskCpfsInText } from '../cpf.js';
import { issuePath, type ValidationIssue } from '../http/errors.js';
import { scrubText } from '../observability/scrub.js';
import { UNSTORABLE_TEXT } from '../provider/schemas.js';

// A campaign's line as a submit's body: parsed (NDJSON) or rebuilt from its CSV fields, then
// validated by the very schema of POST /v1/underwritings (submissions/schemas.ts).

/** Which kind of value each leaf field of the submit's schema takes, by its dotted path (srd.address.city). */
export type FieldKinds = ReadonlyMap<string, string>;

type Def = { type: string; innerType?: ZodLike; shape?: Record<string, ZodLike> };
type ZodLike = { _zod: { def: Def } };

/** The leaf fields of an object schema (optional wrappers looked through), e.g. cpf -> string, srd.grossIncome -> number. */
export function fieldKinds(schema: ZodLike, prefix = ''): Map<string, string> {
  const kinds = new Map<string, string>();
  const walk = (node: ZodLike, path: string) => {
    let def = node._zod.def;
    while ((def.type === 'optional' || def.type === 'nullable' || def.type === 'default') && def.innerType) def = def.innerType._zod.def;
    if (def.type === 'object' && def.shape) {
      for (const [key, child] of Object.entries(def.shape)) walk(child, path ? `${path}.${key}` : key);
    } else {
      kinds.set(path, def.type);
    }
  };
  walk(schema, prefix);
  return kinds;
}

/** What a line's issues may say: never a value of the line, and short (a field name is the client's text). */
const ISSUE_TEXT_MAX = 200;
// maskCpfsInText masks a CPF written bare or with . - _ / or spaces; scrubText then takes what it
// does not read: a CPF percent-encoded (%37...), JSON-escaped (\u0037...) or with wider or other
// separators (712 . 345 . 678 - 17, 712,345,678,17), as a field name may be written.
// Then what PostgreSQL's jsonb refuses (NUL, a surrogate pairing with nothing, as a field name may
// hold or the cut above may leave) becomes U+FFFD: the issues are stored with the campaign.
const UNSTORABLE = new RegExp(UNSTORABLE_TEXT.source, 'g');
const shown = (text: string) =>
  scrubText(maskCpfsInText(text.length > ISSUE_TEXT_MAX ? `${text.slice(0, ISSUE_TEXT_MAX)}…` : text)).replace(UNSTORABLE, '\ufffd');
/** At most this many issues are kept for one line. */
export const ISSUES_PER_LINE = 10;

export const lineIssue = (path: string, message: string): ValidationIssue => ({ path: shown(path), message: shown(message) });

/** zod's issues as the contract's {path, message}; an unknown field is reported at its own path. */
export function issuesOf(error: z.ZodError): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  for (const issue of error.issues) {
    const path = issuePath(issue.path);
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) issues.push(lineIssue(path ? `${path}.${key}` : key, 'unknown field'));
    } else {
      issues.push(lineIssue(path, issue.message));
    }
  }
  return issues.slice(0, ISSUES_PER_LINE);
}

/** A JSON line as a value; V8's parse error quotes the text (a CPF, say), so its message is never used. */
export function parseJsonLine(text: string): { value: unknown } | { issues: ValidationIssue[] } {
  try {
    return { value: JSON.parse(text) };
  } catch {
    return { issues: [lineIssue('', 'not valid JSON')] };
  }
}

const NUMBER = /^-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;

/**
 * A CSV header checked against the submit's fields: every column a field (srd.* flattened with
 * dots), none twice, and the required top-level fields there. Issues for a 400, or none.
 */
export function checkHeader(columns: readonly string[], kinds: FieldKinds, required: readonly string[]): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  const seen = new Set<string>();
  columns.forEach((column, i) => {
    const name = column.trim();
    if (!kinds.has(name)) issues.push(lineIssue(`header.${i + 1}`, `unknown column ${JSON.stringify(name)}: columns are the submit's fields (${[...kinds.keys()].join(', ')})`));
    else if (seen.has(name)) issues.push(lineIssue(`header.${i + 1}`, `column ${name} appears twice`));
    seen.add(name);
  });
  const missing = required.filter((field) => !seen.has(field)).map((field) => lineIssue('header', `column ${field} is missing`));
  // As a line's: at most ISSUES_PER_LINE, the missing columns first (a header of thousands of unknown columns is not answered back whole).
  return [...missing, ...issues].slice(0, ISSUES_PER_LINE);
}

/**
 * A CSV record as the submit's body: an empty cell is an absent field; a cell of a boolean field
 * reads true/false, of a number field a decimal number (anything else stays text, for the schema
 * to refuse in its own words); every other cell is text as it is (a CPF keeps its leading zeros).
 */
export function csvToBody(columns: readonly string[], fields: readonly string[], kinds: FieldKinds): { value: unknown } | { issues: ValidationIssue[] } {
  if (fields.length !== columns.length) {
    return { issues: [lineIssue('', `the line has ${fields.length} fields, the header ${columns.length}`)] };
  }
  const body: Record<string, unknown> = {};
  columns.forEach((column, i) => {
    const cell = fields[i]!;
    if (cell === '') return;
    const kind = kinds.get(column);
    let value: unknown = cell;
    if (kind === 'boolean' && /^(true|false)$/i.test(cell.trim())) value = cell.trim().toLowerCase() === 'true';
    else if (kind === 'number' && NUMBER.test(cell.trim())) value = Number(cell.trim());
    const path = column.split('.');
    let node = body;
    for (const key of path.slice(0, -1)) node = (node[key] ??= {}) as Record<string, unknown>;
    node[path.at(-1)!] = value;
  });
  return { value: body };
}
