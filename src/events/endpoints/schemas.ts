import { z } from 'zod';
import { isWebhookSecret } from '../../config/config.js';
import { ENDPOINT_STATUSES, EVENT_TYPES } from '../../db/types.js';
import { instant } from '../../http/query.js';
import { maskCpfsInText } from '../../cpf.js';
import { isNeverAReceiver, NEVER_A_RECEIVER_MESSAGE } from '../../http/receiver-address.js';
import { STORABLE_TEXT_MESSAGE, storableText } from '../../provider/schemas.js';

export const MAX_URL_LENGTH = 2048;
export const MAX_RATE_PER_S = 10_000;
export const MAX_IN_FLIGHT = 100;
export const DEFAULT_EXPIRE_OLD_AFTER_S = 86_400;

// Never echoes the URL in its message: it may carry a secret.
const endpointUrl = z
  .string()
  .max(MAX_URL_LENGTH)
  .refine(storableText, STORABLE_TEXT_MESSAGE)
  .superRefine((v, ctx) => {
    let u: URL;
    try {
      u = new URL(v);
    } catch {
      ctx.addIssue({ code: 'custom', message: 'must be an http(s) URL' });
      return;
    }
    if ((u.protocol !== 'http:' && u.protocol !== 'https:') || u.hostname === '') ctx.addIssue({ code: 'custom', message: 'must be an http(s) URL' });
    else if (isNeverAReceiver(u.hostname)) ctx.addIssue({ code: 'custom', message: NEVER_A_RECEIVER_MESSAGE });
  })
  .describe('Where events are POSTed (http or https, not a link-local or unspecified address); userinfo (sent as Basic credentials) and query values are never shown again');

/** Text PostgreSQL can hold (no NUL, no lone surrogate: 400 here, not a 500 from the database), CPFs masked as stored. */
const description = z
  .string()
  .max(500)
  .refine(storableText, STORABLE_TEXT_MESSAGE)
  .transform(maskCpfsInText)
  .describe('Free text; a CPF in it is stored masked');

const types = z
  .array(z.enum(EVENT_TYPES))
  .min(1)
  .refine((v) => new Set(v).size === v.length, 'must not repeat a type')
  .describe('Event types it receives; absent or null: every type');

const rate = z.number().int().min(1).max(MAX_RATE_PER_S).describe('Attempts per second at most (across every instance); null: no limit');

const inFlight = z
  .number()
  .int()
  .min(1)
  .max(MAX_IN_FLIGHT)
  .describe(`Attempts in flight to it at most, across every instance (1-${MAX_IN_FLIGHT}); null: only the worker's own limits`);

export const endpointBody = z.strictObject({
  url: endpointUrl,
  description: description.optional(),
  types: types.nullable().optional(),
  rateLimitPerS: rate.nullable().optional(),
  maxInFlight: inFlight.nullable().optional(),
  secret: z.string().refine(isWebhookSecret, 'must be whsec_ followed by the base64 of 24-64 random bytes').optional().describe('Generated when absent'),
});
export type EndpointBody = z.infer<typeof endpointBody>;

export const endpointPatch = z.strictObject({
  url: endpointUrl.optional(),
  description: description.optional(),
  types: types.nullable().optional(),
  rateLimitPerS: rate.nullable().optional(),
  maxInFlight: inFlight.nullable().optional(),
  status: z.enum(['active', 'paused']).optional().describe('paused: nothing is sent, deliveries wait; active resumes them (also a disabled endpoint) in order'),
});
export type EndpointPatch = z.infer<typeof endpointPatch>;

export const endpointParams = z.strictObject({
  id: z.string().regex(/^ep_[0-9a-f]{32}$/, 'must be an endpoint id (ep_ and 32 hex digits)'),
});

export const rotateBody = z
  .strictObject({
    expireOldAfterS: z
      .number()
      .int()
      .min(0)
      .max(30 * 86_400)
      .optional()
      .describe(`Seconds the previous secret keeps signing beside the new one (default ${DEFAULT_EXPIRE_OLD_AFTER_S})`),
  })
  .nullish();

export const replayBody = z.union([
  z.strictObject({ since: instant.describe('every event created at or after this instant') }),
  z.strictObject({ after: z.string().min(1).max(64).describe('a feed cursor (nextCursor of GET /v1/events): every event after it') }),
]);

export const endpointView = z
  .object({
    id: z.string(),
    url: z.string().describe('Without userinfo; query values replaced by "redacted"'),
    description: z.string(),
    types: z.array(z.enum(EVENT_TYPES)).nullable(),
    rateLimitPerS: z.number().int().nullable(),
    maxInFlight: z.number().int().nullable(),
    status: z.enum(ENDPOINT_STATUSES),
    disabledReason: z.string().nullable(),
    createdAt: z.iso.datetime(),
    managed: z.enum(['api', 'config']),
    stats: z.object({
      delivered: z.number().int(),
      failed: z.number().int().describe('Deliveries pending after a failed attempt'),
      dead: z.number().int(),
      lastAttemptAt: z.iso.datetime().nullable(),
      lastStatus: z.number().int().nullable(),
    }),
  })
  .meta({ id: 'Endpoint' });
export type EndpointView = z.infer<typeof endpointView>;

export const createdEndpointView = endpointView
  .extend({ secret: z.string().describe('whsec_…: shown only here and on rotation') })
  .meta({ id: 'CreatedEndpoint' });

export const endpointListView = z.object({ items: z.array(endpointView) }).meta({ id: 'EndpointList' });
export const secretView = z.object({ secret: z.string().describe('The new whsec_… secret: shown only here') }).meta({ id: 'EndpointSecret' });
export const replayedView = z.object({ queued: z.number().int() }).meta({ id: 'EndpointReplayQueued' });
