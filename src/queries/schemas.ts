import { z } from 'zod';
import { DECISIONS, REQUEST_STATUSES } from '../db/types.js';
import { pageOf } from '../http/page.js';
import { cursorParam, instant, orderedWindow, wholeNumber } from '../http/query.js';
import { cpfSchema, customerUuidSchema } from '../provider/schemas.js';
import { requestView, resultView } from '../requests/schemas.js';

/** Long-polls hold a reply at most this long (contract: wait 0-30 s). */
export const MAX_WAIT_S = 30;
export const MAX_PAGE = 500;
export const DEFAULT_PAGE = 50;

export const customerParams = z.strictObject({ customerUuid: customerUuidSchema });

export const customerQuerystring = z.strictObject({
  wait: wholeNumber(0, MAX_WAIT_S)
    .optional()
    .describe('Seconds (0-30) to hold the reply while the newest request has no result'),
});

const listFilters = z.strictObject({
  status: z.enum(REQUEST_STATUSES).optional(),
  decision: z.enum(DECISIONS).optional(),
  since: instant.optional().describe('submittedAt at or after this instant'),
  until: instant.optional().describe('submittedAt before this instant'),
  limit: wholeNumber(1, MAX_PAGE).optional().describe(`Page size, 1-${MAX_PAGE} (default ${DEFAULT_PAGE})`),
  cursor: cursorParam.optional(),
});
export const listQuery = orderedWindow(listFilters);

/** limit and cursor of a lookup may come in the body (preferred) or the query string. */
export const lookupQuery = listFilters.pick({ limit: true, cursor: true });

export const lookupBody = z.strictObject({
  cpf: cpfSchema,
  limit: z.number().int('must be a whole number').min(1, 'must be at least 1').max(MAX_PAGE, `must be at most ${MAX_PAGE}`).optional(),
  cursor: cursorParam.optional(),
}).meta({ id: 'LookupRequest' });

// Response schemas list exactly what leaves the service: objects strip anything else.

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

export const pageView = pageOf(requestView).meta({ id: 'UnderwritingPage' });
export type PageView = z.infer<typeof pageView>;
