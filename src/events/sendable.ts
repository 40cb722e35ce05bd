// A delivery as this worker holds it while it is leased: from a dispatch or a claim, with the body it sends.
import type { ClaimedDelivery, DispatchedDelivery } from './queue-sql.js';

/** One attempt's delivery: leased to this worker under `token`, with the body it sends. */
export interface Sendable {
  id: number;
  urlKey: string;
  customer: string;
  /** Claimed (not leased as it was written): its finished attempt may free a later delivery of the customer. */
  claimed: boolean;
  token: string;
  publicId: string;
  body: string;
  createdAt: Date;
  queuedAt: Date;
  attempts: number;
  traceparent: string | null;
  requestId: string | null;
  /** Sent holding one of its endpoint's maxInFlight slots: given back when the attempt ends. */
  slot?: boolean;
  /**
   * Sent on one of its endpoint's rateLimitPerS slots of this second (its number since the epoch):
   * signed and sent in that second, or not at all (the pacer routes it again for a later one).
   */
  window?: number;
  /** Rate slots it let pass unused, its second gone by before it could be signed (worker.ts, SPENT_SLOTS_MAX). */
  spentSlots?: number;
  /** When its lease ends (ms): after that another instance may claim it. */
  leaseEndsAt: number;
}

export function dispatchedSendable(delivery: DispatchedDelivery, token: string, now: Date, leaseEndsAt: number): Sendable {
  const createdAt = new Date(delivery.created_at);
  return {
    id: delivery.id,
    urlKey: delivery.url_key,
    customer: delivery.customer_uuid,
    claimed: false,
    token,
    publicId: delivery.public_id,
    body: delivery.body,
    createdAt,
    // Eligible now: its retry horizon counts from here (it may have waited behind a paused endpoint).
    queuedAt: now,
    attempts: 0,
    traceparent: delivery.traceparent,
    requestId: delivery.x_request_id,
    leaseEndsAt,
  };
}

export function claimedSendable(delivery: ClaimedDelivery, token: string, leaseEndsAt: number): Sendable {
  return {
    id: delivery.id,
    urlKey: delivery.url_key,
    customer: delivery.customer_uuid,
    claimed: true,
    token,
    publicId: delivery.public_id,
    body: delivery.body,
    createdAt: new Date(delivery.created_at),
    queuedAt: new Date(delivery.queued_at),
    attempts: delivery.attempts,
    traceparent: delivery.traceparent,
    requestId: delivery.x_request_id,
    leaseEndsAt,
  };
}
