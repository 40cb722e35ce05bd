import { z } from 'zod';

// Query-string pieces every read route shares: whole numbers, instants, page cursors.

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

// A cursor is opaque; its shape is checked (and its signature verified) in cursor.ts.
export const cursorParam = z.string().min(1).max(512).describe('nextCursor of the previous page, as given');
