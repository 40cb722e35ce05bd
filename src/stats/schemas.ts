import { z } from 'zod';
import { pageOf } from '../http/page.js';
import { cursorParam, instant, orderedWindow, wholeNumber } from '../http/query.js';

/** At most this many buckets per answer (41 days of hours, 2.7 years of days). */
export const MAX_BUCKETS = 1000;
export const MAX_CALLBACK_PAGE = 200;
export const DEFAULT_CALLBACK_PAGE = 50;

const count = z.number().int().nonnegative();
const isoInstant = z.iso.datetime();

export const statsQuery = orderedWindow(z.strictObject({
  since: instant.optional().describe('Start, rounded down to its bucket; default: until minus 24 h (hour) or 30 days (day)'),
  until: instant.optional().describe('End (exclusive), rounded up to its bucket; default: now'),
  bucket: z.enum(['hour', 'day']).default('hour').describe('Bucket width: a UTC hour or a UTC day (default hour)'),
}));
export type StatsQuery = z.infer<typeof statsQuery>;

const bucketView = z.object({
  start: isoInstant.describe('Start of the bucket (UTC)'),
  submitted: count.describe('Requests submitted in this bucket'),
  completed: count.describe('... of which now completed'),
  expired: count.describe('... now expired (no callback in time)'),
  submit_failed: count.describe('... refused by or unreachable at the provider'),
  pending: count.describe('... still awaiting the provider'),
  decisions: z
    .object({ approved: count, declined: count, no_score: count, filtered: count })
    .describe("The completed requests' decisions"),
  turnaroundMs: z
    .object({ p50: z.number().int().nullable(), p95: z.number().int().nullable() })
    .describe(
      'Submit -> callback of the completed requests, 50th and 95th percentiles, in ms (within ~4.4%: read from a log-scale histogram); null without any',
    ),
  unmatched: count.describe('Callbacks that arrived in this bucket and matched no request'),
  invalid: count.describe('Callbacks that arrived in this bucket and failed validation'),
});
export type BucketView = z.infer<typeof bucketView>;

const presentView = z.object({
  at: isoInstant,
  pending: count.describe('Requests awaiting the provider (queued, submitting or submitted)'),
  oldestPendingAgeS: z.number().int().nullable().describe("Age of the oldest of them, in seconds; null when none"),
  unmatched24h: count.describe('Unmatched callbacks received in the last 24 h'),
  invalid24h: count.describe('Invalid callbacks received in the last 24 h'),
  events: z
    .object({
      pending: count.describe('Deliveries still to be made (one per event and receiving endpoint)'),
      dead: count.describe('Deliveries given up after EVENT_RETRY_HORIZON_S, until redelivered'),
      oldestPendingAgeS: z.number().int().nullable().describe('How long the oldest pending delivery has been queued, in seconds; null when none'),
    })
    .describe('Outcome event push (all zero when no endpoint receives events)'),
  token: z
    .object({
      configured: z.boolean().describe('AUTH_URL and CLIENT_ID are set'),
      expiresAt: isoInstant.nullable().describe("The current token's exp; null before the first token"),
      renewAt: isoInstant.nullable().describe('When it will be renewed'),
    })
    .describe('The provider token client (never the token itself)'),
});
export type PresentView = z.infer<typeof presentView>;

export const statsView = z.object({
  bucket: z.enum(['hour', 'day']),
  since: isoInstant,
  until: isoInstant,
  buckets: z.array(bucketView),
  now: presentView,
}).meta({ id: 'Stats' });
export type StatsView = z.infer<typeof statsView>;

export const strayListQuery = z.strictObject({
  kind: z.enum(['unmatched', 'invalid']).optional().describe('Unset: both'),
  since: instant.optional().describe('receivedAt at or after this instant'),
  limit: wholeNumber(1, MAX_CALLBACK_PAGE)
    .optional()
    .describe(`Page size, 1-${MAX_CALLBACK_PAGE} (default ${DEFAULT_CALLBACK_PAGE})`),
  cursor: cursorParam.optional(),
});

export const strayCallbackView = z.object({
  id: z.number().int(),
  customerUuid: z.string().nullable(),
  receivedAt: isoInstant,
  kind: z.enum(['unmatched', 'invalid']),
  problem: z.string().nullable().describe('Why an invalid callback was refused; null for unmatched'),
  rawBody: z.string().describe('The bytes as stored (as received, every CPF masked before storing), as UTF-8 text, with any CPF-like digit run masked'),
}).meta({ id: 'StrayCallback' });
export type StrayCallbackView = z.infer<typeof strayCallbackView>;

export const strayPageView = pageOf(strayCallbackView).meta({ id: 'StrayCallbackPage' });
