import { z } from 'zod';

// Query-string pieces every read route shares: whole numbers, instants, time windows, page cursors.

/** A whole number in the query string: text on the wire, checked digit by digit, documented as the integer it is. */
export const wholeNumber = (min: number, max: number) =>
  z
    .string()
    .regex(/^\d{1,6}$/, 'must be a whole number')
    .transform(Number)
    .pipe(z.number().int().min(min, `must be at least ${min}`).max(max, `must be at most ${max}`))
    .meta({ type: 'integer', minimum: min, maximum: max });

/**
 * A date-time with a zone, or a bare date (midnight UTC); kept as text so microseconds survive.
 * The union comes before the transform, so the document shows both forms the server accepts.
 */
export const instant = z
  .union([
    z.iso.datetime({ offset: true, message: 'must be an ISO 8601 date-time with a time zone, or a date' }).describe('ISO 8601 date-time with a zone'),
    z.iso.date().describe('A date: midnight UTC'),
  ])
  // ISO 8601 allows year 0000; PostgreSQL has no such year, and a filter must never become a 500.
  .refine((v) => !v.startsWith('0000'), 'year 0000 is not a valid date here')
  // ISO 8601 offsets reach ±23:59; PostgreSQL's stop at ±15:59.
  .refine((v) => Number(/[+-](\d{2}):?\d{2}$/.exec(v)?.[1] ?? 0) < 16, 'the time zone offset must be within ±15:59')
  .transform((v) => (v.length === 10 ? `${v}T00:00:00Z` : v))
  .describe('ISO 8601 date-time with a zone, or a date (midnight UTC)');

/**
 * Whether instant a comes before b, both as `instant` (or another ISO 8601 date-time with a zone)
 * passes them on: offsets count, and so do the digits past the millisecond that Date drops.
 */
export function instantBefore(a: string, b: string): boolean {
  const ms = Date.parse(a) - Date.parse(b);
  if (ms !== 0) return ms < 0;
  // Fraction digits compare as text once trailing zeros are gone ("45" < "5", as 0.45 < 0.5).
  const beyondMs = (v: string) => (/\.\d{3}(\d*)/.exec(v)?.[1] ?? '').replace(/0+$/, '');
  return beyondMs(a) < beyondMs(b);
}

/** The one word on a window whose since is not before its until, wherever since and until are taken. */
export const WINDOW_ORDER_MESSAGE = 'must be before until';

/** What orderedWindow enforces, as route descriptions in the OpenAPI document state it. */
export const WINDOW_ORDER_RULE = 'Given both, since must be before until: an equal or later since is 400 validation_failed (issue at since).';

/** How a route's description states its window [since, until) on one field (`at`, `submittedAt`, …). */
export const windowRule = (field: string) => `since is inclusive and until exclusive, both on ${field}. ${WINDOW_ORDER_RULE}`;

/**
 * A query or body with a window [since, until): when both are given, since must come before until.
 * A swapped (or empty) window is a 400 at since rather than an answer that says nothing happened.
 * Left out while the value is no object, or since or until is itself invalid: their own issues say what is wrong.
 */
export function orderedWindow<T extends z.ZodType<{ since?: string | undefined; until?: string | undefined }>>(schema: T): T {
  return schema.refine((v: { since?: string | undefined; until?: string | undefined }) => v.since === undefined || v.until === undefined || instantBefore(v.since, v.until), {
    path: ['since'],
    message: WINDOW_ORDER_MESSAGE,
    when: (payload) =>
      typeof payload.value === 'object' && payload.value !== null && !payload.issues.some((issue) => issue.path?.[0] === 'since' || issue.path?.[0] === 'until'),
  });
}

// A cursor is opaque; its shape is checked (and its signature verified) in cursor.ts.
export const cursorParam = z.string().min(1).max(512).describe('nextCursor of the previous page, as given');
