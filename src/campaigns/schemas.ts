import { z } from 'zod';
import { idempotencyKeySchema } from '../submissions/schemas.js';
import { CAMPAIGN_SOURCES, CAMPAIGN_STATUSES, DECISIONS, REQUEST_STATUSES } from '../db/types.js';
import { errorSchema, validationErrorSchema } from '../http/errors.js';
import { pageOf } from '../http/page.js';
import { cursorParam, wholeNumber } from '../http/query.js';

// The campaigns routes' schemas: what they take, and exactly what leaves (objects strip the rest).

export const MAX_PAGE = 100;
export const DEFAULT_PAGE = 20;

export const campaignParams = z.strictObject({
  id: z.string().regex(/^cmp_[0-9a-f]{32}$/, 'must be a campaign id (cmp_ and 32 hex digits)').describe('The campaign id, as POST /v1/campaigns answered'),
});

export const listQuery = z.strictObject({
  limit: wholeNumber(1, MAX_PAGE).optional().describe(`Page size, 1-${MAX_PAGE} (default ${DEFAULT_PAGE})`),
  cursor: cursorParam.optional(),
});

/** The file, documented: the handler reads it as a stream, line by line (never whole). */
export const campaignBody = z
  .string()
  .describe(
    'One submit per line, as the body of POST /v1/underwritings. NDJSON (application/x-ndjson): one JSON object per line. ' +
      'CSV (text/csv, RFC 4180): a header row naming the fields (srd.* flattened with dots: srd.grossIncome, srd.address.city), ' +
      'then one submit per row; an empty cell is an absent field. Up to 1,000,000 lines and 1 GiB; a line up to 16,384 characters.',
  );

export const lineIssueSchema = z.object({ path: z.string(), message: z.string() });

export const rejectedLineSchema = z
  .object({
    line: z.number().int().min(1).describe('The line of the file (CSV: the header is line 1; a quoted field may span lines: the line it starts on)'),
    issues: z.array(lineIssueSchema).describe('Why, as a submit would be refused: never the line\'s content'),
  })
  .meta({ id: 'CampaignRejectedLine' });

export const uploadAnswer = z
  .object({
    id: z.string(),
    accepted: z.number().int().describe('Lines queued as submits'),
    rejected: z.array(rejectedLineSchema).describe('The first 1000 rejected lines, by line number'),
    rejectedTotal: z.number().int().describe('Every rejected line, counted'),
  })
  .meta({ id: 'CampaignAccepted' });

const count = z.number().int().min(0);

export const countsView = z
  .object({
    queued: count,
    submitting: count,
    submitted: count,
    completed: count,
    submit_failed: count,
    expired: count,
    cancelled: count,
    approved: count,
    declined: count,
    filtered: count,
    no_score: count,
  })
  .describe('Requests of the campaign by status, and the completed ones by decision')
  .meta({ id: 'CampaignCounts' });

const summaryFields = {
  id: z.string(),
  createdAt: z.iso.datetime(),
  status: z.enum(CAMPAIGN_STATUSES).describe('running until nothing is queued, being sent or awaiting its callback (then done); cancelled by POST .../cancel or by a failed upload'),
  source: z.enum(CAMPAIGN_SOURCES),
  accepted: count,
  rejectedTotal: count,
  uploadedAt: z.iso.datetime().nullable().describe('When the whole file had been read; null while it is read, or if the upload failed'),
  uploadError: z.string().nullable().describe('Why the upload failed (what it had queued was cancelled)'),
};

export const campaignSummary = z.object(summaryFields).meta({ id: 'CampaignSummary' });
export type CampaignSummary = z.infer<typeof campaignSummary>;

export const campaignView = z
  .object({
    ...summaryFields,
    createdBy: z.string().describe('key:<fingerprint of the API key> or peer:<address> when no keys are configured'),
    cancelledAt: z.iso.datetime().nullable(),
    counts: countsView,
    ratePerS: z.number().min(0).describe('Requests of the campaign forwarded to the provider per second, over the last minute'),
    etaS: z.number().int().min(0).nullable().describe('Seconds until every queued request is forwarded at that rate; null while none is being forwarded'),
    rejected: z.array(rejectedLineSchema).describe('The first 1000 rejected lines'),
  })
  .meta({ id: 'Campaign' });
export type CampaignView = z.infer<typeof campaignView>;

export const campaignPage = pageOf(campaignSummary).meta({ id: 'CampaignPage' });

export const cancelAnswer = z
  .object({ id: z.string(), status: z.literal('cancelled'), cancelled: count.describe('Queued requests this call ended as cancelled') })
  .meta({ id: 'CampaignCancelled' });

/** One line of the results file: CSV columns or NDJSON fields, in this order. */
export const resultLine = z
  .object({
    customerUuid: z.string(),
    status: z.enum(REQUEST_STATUSES),
    decision: z.enum(DECISIONS).nullable(),
    score: z.number().nullable(),
    riskBand: z.number().nullable(),
    limit: z.number().nullable(),
    cpfMasked: z.string(),
    completedAt: z.iso.datetime().nullable(),
  })
  .meta({ id: 'CampaignResult' });
export type ResultLine = z.infer<typeof resultLine>;
export const RESULT_COLUMNS = Object.keys(resultLine.shape) as Array<keyof ResultLine>;

export const resultsQuery = z.strictObject({
  format: z.enum(['csv', 'ndjson']).optional().describe('Overrides Accept: csv (the default) or ndjson'),
});

const guarded = { 401: errorSchema, 403: errorSchema, 503: errorSchema };
const notFound = errorSchema.describe('not_found: no campaign with this id');

export const uploadResponses = {
  202: uploadAnswer,
  400: validationErrorSchema.describe('validation_failed: the CSV header does not name the submit\'s fields, or the file cannot be read on'),
  409: errorSchema.describe('campaign_cancelled: the campaign was cancelled while its file was read; in_flight: an upload with this Idempotency-Key is still being read'),
  413: errorSchema.describe('payload_too_large: over 1 GiB or 1,000,000 lines; what was queued of it is cancelled'),
  415: errorSchema.describe('unsupported_media_type: send application/x-ndjson or text/csv (UTF-8), uncompressed (no Content-Encoding, no Transfer-Encoding but chunked)'),
  422: errorSchema.describe('idempotency_key_reused: this Idempotency-Key was used with a different file (or media type) within 24 h'),
  ...guarded,
};

export const uploadHeaders = z.looseObject({
  'idempotency-key': idempotencyKeySchema
    .optional()
    .describe(
      'Names this upload for 24 h: a retry with the same key and the same file (same bytes, same media type) is answered 202 with ' +
        'the same campaign again (header Idempotent-Replayed: true), nothing queued twice; with another file, 422 idempotency_key_reused; ' +
        'while the first upload is still being read, 409 in_flight. An upload that failed frees its key.',
    ),
});

export const readResponses = { 200: campaignView, 400: validationErrorSchema, 404: notFound, ...guarded };
export const listResponses = { 200: campaignPage, 400: validationErrorSchema, ...guarded };
export const cancelResponses = { 202: cancelAnswer, 400: validationErrorSchema, 404: notFound, ...guarded };
export const resultsResponses = {
  200: {
    description: 'The results, one line per accepted line of the file, in file order: CSV with a header row (default), or NDJSON',
    content: {
      'text/csv': { schema: z.string().describe(`Columns: ${RESULT_COLUMNS.join(',')}`) },
      'application/x-ndjson': { schema: z.string().describe('One CampaignResult object per line') },
    },
  },
  400: validationErrorSchema,
  404: notFound,
  ...guarded,
};
