import { z } from 'zod';
import { DECISIONS, REQUEST_STATUSES } from '../db/types.js';
import { httpStatusSchema } from '../http/errors.js';
import { addressSchema, OCCUPATIONS } from '../provider/schemas.js';

// A request as it leaves the service (lookups, events, exports). Response schemas list exactly
// what leaves: objects strip anything else.

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
  submittedAt: z.iso.datetime().nullable().describe('When it was sent to the provider; null while queued, or cancelled before it was sent'),
  completedAt: z.iso.datetime().nullable(),
  upstreamStatus: httpStatusSchema.nullable(),
  result: resultView.nullable(),
}).meta({ id: 'UnderwritingRecord' });

/** submittedAt as answered: a request never sent (queued, cancelled) has none (submitted_at holds its queue time until then). */
export function submittedAtView(status: string, submittedAt: Date): string | null {
  return status === 'queued' || status === 'cancelled' ? null : submittedAt.toISOString();
}
export type RequestView = z.infer<typeof requestView>;
