import { z } from 'zod';
import { DECISIONS, REQUEST_STATUSES } from '../db/types.js';
import { httpStatusSchema } from '../errors.js';
import { addressSchema, cpfSchema, customerUuidSchema, OCCUPATIONS } from '../provider/schemas.js';

/** Long-polls hold a reply at most this long (contract: wait 0-30 s). */
export const MAX_WAIT_S = 30;
export const MAX_PAGE = 500;
export const DEFAULT_PAGE = 50;

/** A whole number in the query string: text on the wire, checked digit by digit, documented as the integer it is. */
export const wholeNumber = (min: number, max: number) =>
  z
    .string()
    .regex(/^\d{1,6}$/, 'must be a whole number')
    .transform(Number)
    .pipe(z.number().int().min(min, `must be at least ${min}`).max(max, `must be at most ${max}`))
    .meta({ type: 'integer', minimum: min, maximum: max });

/** A date-time with a zone, or a bare date (midnight UTC); kept as text so microseconds survive. */
export const instant = z
  .union([
    z.iso.datetime({ offset: true, message: 'must be an ISO 8601 date-time with a time zone, or a date' }),
    z.iso.date().transform((d) => `${d}T00:00:00Z`),
  ])
  // ISO 8601 allows year 0000; PostgreSQL has no such year, and a filter must never become a 500.
  .refine((v) => !v.startsWith('0000'), 'year 0000 is not a valid date here')
  // ISO 8601 offsets reach ±23:59; PostgreSQL's stop at ±15:59.
  .refine((v) => Number(/[+-](\d{2}):?\d{2}$/.exec(v)?.[1] ?? 0) < 16, 'the time zone offset must be within ±15:59')
  .describe('ISO 8601 date-time with a zone, or a date (midnight UTC)');

// A cursor is opaque; its shape is checked (and its signature verified) in cursor.ts.
export const cursorParam = z.string().min(1).max(512).describe('nextCursor of the previous page, as given');

export const customerParams = z.strictObject({ customerUuid: customerUuidSchema });

export const customerQuerystring = z.strictObject({
  wait: wholeNumber(0, MAX_WAIT_S)
    .optional()
    .describe('Seconds (0-30) to hold the reply while the newest request has no result'),
});

export const listQuery = z.strictObject({
  status: z.enum(REQUEST_STATUSES).optional(),
  decision: z.enum(DECISIONS).optional(),
  since: instant.optional().describe('submittedAt at or after this instant'),
  until: instant.optional().describe('submittedAt before this instant'),
  limit: wholeNumber(1, MAX_PAGE).optional().describe(`Page size, 1-${MAX_PAGE} (default ${DEFAULT_PAGE})`),
  cursor: cursorParam.optional(),
});

/** limit and cursor of a lookup may come in the body (preferred) or the query string. */
export const lookupQuery = listQuery.pick({ limit: true, cursor: true });

export const lookupBody = z.strictObject({
  cpf: cpfSchema,
  limit: z.number().int('must be a whole number').min(1, 'must be at least 1').max(MAX_PAGE, `must be at most ${MAX_PAGE}`).optional(),
  cursor: cursorParam.optional(),
}).meta({ id: 'LookupRequest' });

// Response schemas list exactly what leaves the service: objects strip anything else.

const srdView = z.object({
  grossIncome: z.number(),
  housingSpends: z.number().optional(),
  cardSpends: z.number().optional(),
  loanSpends: z.number().optional(),
  address: z.object(addressSchema.shape).optional(),
  occupation: z.enum(OCCUPATIONS).optional(),
  desiredCreditLimit: z.number().optional(),
}).meta({ id: 'StoredSrd' });

/** The callback body as stored: the provider's documented fields only. */
export const resultView = z.object({
  customerUuid: z.string(),
  started: z.string(),
  finished: z.string(),
  serviceType: z.string(),
  response: z.object({
    costSavingEnabled: z.boolean(),
    score: z.number(),
    riskBand: z.number(),
    limit: z.number(),
  }),
}).meta({ id: 'StoredResult' });

export const requestView = z.object({
  customerUuid: z.string(),
  status: z.enum(REQUEST_STATUSES),
  decision: z.enum(DECISIONS).nullable(),
  cpfMasked: z.string(),
  costSavingEnabled: z.boolean(),
  srd: srdView.nullable(),
  submittedAt: z.iso.datetime(),
  completedAt: z.iso.datetime().nullable(),
  upstreamStatus: httpStatusSchema.nullable(),
  result: resultView.nullable(),
}).meta({ id: 'UnderwritingRecord' });
export type RequestView = z.infer<typeof requestView>;

export const unmatchedView = z.object({
  receivedAt: z.iso.datetime(),
  result: resultView.nullable(),
}).meta({ id: 'UnmatchedCallback' });
export type UnmatchedView = z.infer<typeof unmatchedView>;

/** One customer: the newest request at the top level, older ones in history, stray callbacks in unmatched. */
export const customerView = requestView.extend({
  history: z.array(requestView),
  unmatched: z.array(unmatchedView),
}).meta({ id: 'CustomerUnderwritings' });
export type CustomerView = z.infer<typeof customerView>;

export const pageView = z.object({
  items: z.array(requestView),
  nextCursor: z.string().nullable(),
}).meta({ id: 'UnderwritingPage' });
export type PageView = z.infer<typeof pageView>;
