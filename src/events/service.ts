import type { Kysely } from 'kysely';
import type { NotificationChannel } from '../channels/channel.js';
import type { Tables } from '../db/types.js';
import { notFound } from '../http/errors.js';
import type { EndpointRegistry } from './endpoints/registry.js';
import { eventView, FEED_READS_IN_FLIGHT, readFeedPage, type FeedRequest } from './feed.js';
import { readLimiter } from './read-limiter.js';
import { readEvent } from './feed-sql.js';
import type { EventMetrics } from './metrics.js';
import { type BulkRedelivery, redeliverDeliveries, redeliverEvent } from './redelivery-sql.js';

export interface EventServiceDeps {
  db: Kysely<Tables>;
  clock: () => Date;
  /** The results channel's wait for anything new (a committed change on any instance). */
  waitAny: NotificationChannel['waitAny'];
  metrics: Pick<EventMetrics, 'waiting' | 'feedReadQueued'>;
  /** Every endpoint this instance sends to: the feed shows their deliveries, redelivery queues for them. */
  endpoints: Pick<EndpointRegistry, 'targets'>;
  /** Something is due now: this instance's delivery worker looks at once. */
  wake(): void;
}

/** The feed and redelivery: what GET /v1/events, GET /v1/events/:id and the redeliver routes do. */
export function eventService(deps: EventServiceDeps) {
  const { db } = deps;
  const keys = () => deps.endpoints.targets().map((t) => t.key);
  const limit = readLimiter(FEED_READS_IN_FLIGHT, (kind, delta) => deps.metrics.feedReadQueued(kind, delta));
  return {
    feed: (request: FeedRequest) =>
      readFeedPage({ db, waitAny: deps.waitAny, onWaiting: (delta) => deps.metrics.waiting(delta), keys: keys(), limit }, request),

    /** One event with its deliveries; 404 when there is none. */
    async event(id: string) {
      const row = await readEvent(db, id, keys());
      if (!row) throw notFound(`no event ${id}`);
      return eventView(row);
    },

    /** Queues one event again for every endpoint that receives its type; 404 when there is no such event. */
    async redeliverEvent(id: string): Promise<number> {
      const queued = await redeliverEvent(db, id, deps.endpoints.targets(), deps.clock());
      if (queued === undefined) throw notFound(`no event ${id}`);
      deps.wake();
      return queued;
    },

    /** Queues again the deliveries asked for, to every endpoint or one (404 when this instance sends to no such endpoint). */
    async redeliverDeliveries(which: BulkRedelivery, endpointId: string | undefined): Promise<number> {
      const targets = deps.endpoints.targets().filter((t) => endpointId === undefined || t.id === endpointId);
      if (endpointId !== undefined && targets.length === 0) throw notFound(`no endpoint ${endpointId}`);
      const queued = await redeliverDeliveries(db, which, targets, deps.clock());
      deps.wake();
      return queued;
    },
  };
}
export type EventService = ReturnType<typeof eventService>;
