// The handoff between the statements that write events and this instance's delivery worker: a
// delivery written by this instance is leased to it in the same statement and sent as it commits.

/** What a statement that leases new deliveries asks of the instance pushing them. */
export interface DeliveryLease {
  token: string;
  until: Date;
}

/** A delivery leased to this instance as it was written, with everything its first attempt sends. */
export interface LeasedDelivery {
  id: number;
  urlKey: string;
  customer: string;
  token: string;
  publicId: string;
  body: string;
  createdAt: Date;
}

/** Between the statements that write events and this instance's delivery worker. */
export interface DeliveryHandoff {
  /** A lease for the deliveries about to be written; undefined: leave them to the claims. */
  lease(): DeliveryLease | undefined;
  /**
   * Deliveries written under that lease, committed: send them. `held`: customers whose new
   * delivery was not leased because an earlier one of theirs is still pending; it is claimed
   * once that one is done.
   */
  adopt(deliveries: readonly LeasedDelivery[], held: readonly string[]): void;
}

/** The app's handoff, to which the events plugin attaches its worker (and detaches it on close). */
export interface AppDeliveryHandoff extends DeliveryHandoff {
  attach(worker: DeliveryHandoff | undefined): void;
}

/** The app's handoff: hands over to the worker once the events plugin has started one. */
export function deliveryHandoff(): AppDeliveryHandoff {
  let worker: DeliveryHandoff | undefined;
  return {
    attach(next) {
      worker = next;
    },
    lease: () => worker?.lease(),
    adopt(deliveries, held) {
      worker?.adopt(deliveries, held);
    },
  };
}
