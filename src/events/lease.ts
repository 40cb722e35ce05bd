import type { Kysely } from 'kysely';
import type { Tables } from '../db/types.js';
import { renewLeases } from './queue-sql.js';

/**
 * How long a delivery may have held its lease before its attempt begins without renewing it. A
 * lease runs the attempt timeout + 5 s from the claim: an attempt begun within 1 s of it still has
 * its whole timeout and 4 s to write its outcome ahead of it.
 */
export const RENEW_AFTER_MS = 1000;

/** A delivery leased to this worker: its id, the lease's token and when the lease ends (ms). */
export interface HeldLease {
  id: number;
  token: string;
  leaseEndsAt: number;
}

export interface LeaseKeeper {
  /**
   * Called as an attempt begins: true when the delivery's lease covers the attempt and the write
   * of its outcome (renewed first when it has waited, for its endpoint's rate or in-flight slot,
   * more than RENEW_AFTER_MS), false when it is no longer this worker's to send (the lease ran
   * out and another instance took the delivery over, or the renewal could not be written).
   */
  hold(delivery: HeldLease): Promise<boolean>;
}

/**
 * Keeps a waiting delivery's lease for its attempt's whole life: the lease counts from when the
 * attempt may begin, not from the claim. Renewals asked for in the same turn of the event loop
 * share one statement.
 */
export function leaseKeeper(deps: {
  db: Kysely<Tables>;
  clock: () => Date;
  leaseS: number;
  onError: (err: unknown) => void;
}): LeaseKeeper {
  let batch: Array<{ delivery: HeldLease; resolve: (held: boolean) => void }> = [];

  async function renew(): Promise<void> {
    const asked = batch;
    batch = [];
    const now = deps.clock();
    let renewed: Set<number>;
    try {
      renewed = new Set(await renewLeases(deps.db, { now, leaseS: deps.leaseS, leases: asked.map((a) => a.delivery) }));
    } catch (err) {
      // Not sent: its lease runs out and the delivery is claimed again (here or elsewhere).
      deps.onError(err);
      renewed = new Set();
    }
    for (const { delivery, resolve } of asked) {
      if (renewed.has(delivery.id)) delivery.leaseEndsAt = now.getTime() + deps.leaseS * 1000;
      resolve(renewed.has(delivery.id));
    }
  }

  return {
    hold(delivery) {
      if (deps.clock().getTime() + deps.leaseS * 1000 - RENEW_AFTER_MS <= delivery.leaseEndsAt) return Promise.resolve(true);
      return new Promise((resolve) => {
        if (batch.length === 0) setImmediate(() => void renew());
        batch.push({ delivery, resolve });
      });
    },
  };
}
