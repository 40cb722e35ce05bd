import { z } from 'zod';
import { DELIVERY_STATUSES, EVENT_TYPES } from '../db/types.js';
import { instant, orderedWindow, wholeNumber } from '../http/query.js';
import { customerUuidSchema } from '../provider/schemas.js';
import { requestView, resultView } from '../requests/schemas.js';

export const MAX_FEED_PAGE = 500;
export const DEFAULT_FEED_PAGE = 100;
export const MAX_FEED_WAIT_S = 30;

export const feedQuery = z.strictObject({
  after: z.string().min(1).max(64).optional().describe('nextCursor of the previous page, as given (exclusive)'),
  limit: wholeNumber(1, MAX_FEED_PAGE).optional().describe(`Page size, 1-${MAX_FEED_PAGE} (default ${DEFAULT_FEED_PAGE})`),
  type: z.enum(EVENT_TYPES).optional(),
  customerUuid: customerUuidSchema.optional(),
  wait: wholeNumber(0, MAX_FEED_WAIT_S).optional().describe('Seconds (0-30) to hold the reply while nothing is newer than after'),
});
export type FeedQuery = z.infer<typeof feedQuery>;

export const eventParams = z.strictObject({
  id: z.string().regex(/^evt_[0-9a-f]{32}$/, 'must be an event id (evt_ and 32 hex digits)'),
});

export const bulkRedeliverBody = orderedWindow(z.strictObject({
  status: z.enum(['dead', 'delivered']).describe('The deliveries queued again: dead ones, or delivered ones (sent again)'),
  since: instant.optional().describe('events created at or after this instant'),
  until: instant.optional().describe('events created before this instant'),
  endpointId: z
    .string()
    .regex(/^ep_[0-9a-f]{32}$/, 'must be an endpoint id (ep_ and 32 hex digits)')
    .optional()
    .describe('Only the deliveries to this endpoint (an id of GET /v1/endpoints); absent: to every endpoint'),
  type: z.enum(EVENT_TYPES).optional().describe('Only events of this type'),
}).refine((b) => b.status !== 'delivered' || b.since !== undefined || b.endpointId !== undefined, {
  // Unbounded, it would send every delivered delivery of the whole history again in one statement.
  message: 'status "delivered" needs since or endpointId: it would send the whole history again',
  path: ['status'],
}));

export const deliveryView = z.object({
  url: z.string().describe('The receiver URL without userinfo or query values'),
  status: z.enum(DELIVERY_STATUSES),
  attempts: z.number().int(),
  lastAttemptAt: z.iso.datetime().nullable(),
  lastStatus: z.number().int().nullable(),
  lastError: z.string().nullable(),
}).meta({ id: 'EventDelivery' });

const unmatchedData = z.object({
  customerUuid: z.string(),
  receivedAt: z.iso.datetime(),
  result: resultView.nullable(),
});

const endpointDisabledData = z.object({
  endpointId: z.string(),
  url: z.string().describe('The endpoint URL without userinfo or query values'),
  disabledReason: z.string(),
  failingSince: z.iso.datetime(),
});

export const eventView = z.object({
  id: z.string(),
  type: z.enum(EVENT_TYPES),
  timestamp: z.iso.datetime(),
  data: z.union([requestView, unmatchedData, endpointDisabledData]),
  deliveries: z.array(deliveryView),
}).meta({ id: 'Event' });
export type EventView = z.infer<typeof eventView>;

export const feedView = z.object({
  items: z.array(eventView),
  nextCursor: z.string().nullable().describe('Where the next page starts; after the last item, or the given after when there is none'),
}).meta({ id: 'EventPage' });

export const queuedView = z.object({ queued: z.number().int() }).meta({ id: 'RedeliveryQueued' });

