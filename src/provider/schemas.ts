import { z } from 'zod';
import type { Decision } from '../db/types.js';

/** The provider's submit path, below its base URL. */
export const UNDERWRITINGS_PATH = '/api/partner/credit/cards/underwritings';

// The provider's own resources (provider-api.md), shared by the submit route, the callback
// route and the sandbox, so that the gateway and its simulator can never disagree.

export const OCCUPATIONS = [
  'Company Employee',
  'Retired',
  'Self-Employment',
  'Public Sector',
  'Multiple sources of income',
  'Other',
] as const;

/** Amounts in R$: finite (zod 4 refuses Infinity and NaN) and never negative. */
const amount = z.number().nonnegative('must not be negative');

/** What PostgreSQL's text and jsonb refuse: NUL, and surrogates that pair with nothing. */
export const UNSTORABLE_TEXT = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Text PostgreSQL can hold: refused otherwise as the request's fault (400), before anything is stored or sent. */
export const storableText = (s: string) => !UNSTORABLE_TEXT.test(s);
export const STORABLE_TEXT_MESSAGE = 'must not contain NUL or unpaired surrogate characters';

/** "Requiredness of the address fields, the format of state: not shown" - all optional, bounded strings. */
const addressField = z
  .string()
  .max(200, 'must be at most 200 characters')
  // Refused here, as the request's fault (400), before anything is stored or sent.
  .refine(storableText, STORABLE_TEXT_MESSAGE);

export const addressSchema = z.strictObject({
  street: addressField.optional(),
  number: addressField.optional(),
  complement: addressField.optional(),
  city: addressField.optional(),
  state: addressField.optional(),
});

export const srdSchema = z.strictObject({
  grossIncome: amount,
  housingSpends: amount.optional(),
  cardSpends: amount.optional(),
  loanSpends: amount.optional(),
  address: addressSchema.optional(),
  occupation: z.enum(OCCUPATIONS).optional(),
  desiredCreditLimit: amount.optional(),
});

export const customerUuidSchema = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,128}$/, 'must be 1-128 letters, digits, "-" or "_"');

export const cpfSchema = z.string().regex(/^[0-9]{11}$/, 'must be exactly 11 digits, as a string');

export const underwritingRequestSchema = z.strictObject({
  customerUuid: customerUuidSchema,
  cpf: cpfSchema,
  costSavingEnabled: z.boolean(),
  srd: srdSchema.optional(),
}).meta({ id: 'UnderwritingRequest' });
export type UnderwritingRequest = z.infer<typeof underwritingRequestSchema>;
export type Srd = z.infer<typeof srdSchema>;

export const underwritingResponseSchema = z.looseObject({
  costSavingEnabled: z.boolean(),
  score: z.number(),
  riskBand: z.number().int('must be an integer'),
  limit: z.number(),
});

const isoInstant = z.iso.datetime({ offset: true });
const ZONE = /(Z|[+-]\d{2}(?::?\d{2})?)$/i;

/**
 * The provider's date-times as one instant PostgreSQL reads the same whatever its session zone:
 * the spec says they are UTC, so a time without a zone is UTC, and +HHMM / +HH mean +HH:MM.
 */
export function toUtcInstant(value: string): string {
  const zone = ZONE.exec(value);
  if (!zone) return `${value}Z`;
  const z = zone[1]!;
  if (z.toUpperCase() === 'Z' || z.includes(':')) return value;
  const normalized = z.length === 3 ? `${z}:00` : `${z.slice(0, 3)}:${z.slice(3)}`;
  return value.slice(0, value.length - z.length) + normalized;
}

/** A losing callback is never coming back: accept every unambiguous ISO 8601 date-time the provider may send. */
const providerInstant = z
  .string()
  .refine((v) => /^\d{4}-\d{2}-\d{2}T/.test(v) && isoInstant.safeParse(toUtcInstant(v)).success, {
    message: 'must be an ISO 8601 date-time (UTC when it has no zone)',
  });

/**
 * The callback body. Unknown fields are kept, not refused: a provider that adds a field must not
 * see its callbacks bounce (refusing one may mean never getting it again).
 */
export const underwritingResultSchema = z.looseObject({
  customerUuid: customerUuidSchema,
  started: providerInstant,
  finished: providerInstant,
  serviceType: z.literal('CREDIT_SCORE'),
  response: underwritingResponseSchema,
}).meta({ id: 'UnderwritingResult' });
export type UnderwritingResult = z.infer<typeof underwritingResultSchema>;

/** The contract's decision table, applied to a stored result. */
export function decide(response: Pick<UnderwritingResult['response'], 'costSavingEnabled' | 'score' | 'limit'>): Decision {
  if (response.score === -1) return response.costSavingEnabled ? 'filtered' : 'no_score';
  // limit -1 means "no score"; any other negative limit is meaningless, and no_score is the honest reading.
  if (response.limit < 0) return 'no_score';
  return response.limit > 0 ? 'approved' : 'declined';
}
