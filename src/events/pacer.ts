import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Tables } from '../db/types.js';
import { endpointBreaker } from './breaker.js';
import { releaseInFlightSlots, reserveInFlightSlots, reserveRateSlots } from './endpoint-limits-sql.js';
import type { EndpointTarget } from './endpoints/registry.js';
import type { Sendable } from './sendable.js';

// Each endpoint's pace, for one instance's delivery worker: how many of its attempts may be in
// flight here (a slow endpoint cannot take every slot from the others), its rateLimitPerS and
// maxInFlight across every instance (slots reserved in its row), and the probes of an endpoint
// that keeps failing (breaker.ts). Attempts that wait for their endpoint's pace take none of the
// worker's concurrency.

/**
 * How long an endpoint's waiting attempts wait before asking again for a slot of its maxInFlight
 * when every slot is held (by other instances: they give theirs back as their attempts end).
 */
export const IN_FLIGHT_POLL_MS = 50;

export interface EndpointPacerDeps {
  db: Kysely<Tables>;
  clock: () => Date;
  /** The worker's attempts in flight at most. */
  concurrency: number;
  active(): readonly EndpointTarget[];
  targetOf(key: string): EndpointTarget | undefined;
  pollMs: number;
  /** How long a holder's reservation counts without news of it: an attempt ends within the timeout. */
  slotsTtlS: number;
  stopped(): boolean;
  warn(err: unknown, message: string): void;
  /** Endpoints left out of claims for their pace may be claimed again. */
  wake(): void;
  /**
   * Makes the attempt (the worker's own bookkeeping included); resolves once it has ended, or with
   * 'again' when it was not made because the second its rate slot was for (`window`) had passed
   * before it could be signed (its lease was being renewed): then it waits for a later second's slot.
   */
  attempt(delivery: Sendable): Promise<void | 'again'>;
}

export interface EndpointPacer {
  /** Sends now, or once its endpoint's rate and cap allow. */
  route(delivery: Sendable): void;
  /** Enough of its attempts wait already: the endpoint is left out of claims until they go. */
  throttled(target: EndpointTarget): boolean;
  /** An attempt to the endpoint ended: a 2xx (ok) or not (the breaker counts them). */
  record(key: string, ok: boolean): void;
  /** Attempts begun and not ended. */
  inFlight(): number;
  /** Stopping: the attempts still waiting for their pace, taken out (to be given back unattempted). */
  takeWaiting(): Sendable[];
  /** Stopped, attempts ended: every in-flight slot this worker still holds, given back. */
  release(): Promise<void>;
}

export function endpointPacer(deps: EndpointPacerDeps): EndpointPacer {
  /**
   * Attempts in flight to one endpoint at most (this instance): with several endpoints, a slow one
   * (answers after seconds) cannot take every slot from the others; alone, it has them all.
   */
  const endpointCap = () => Math.max(1, Math.ceil(deps.concurrency / Math.min(4, Math.max(1, deps.active().length))));
  const sendingTo = new Map<string, number>();
  /** Its maxInFlight (across every instance), while it is active; null: none. */
  const inFlightCapOf = (key: string) => {
    const target = deps.targetOf(key);
    return target?.status === 'active' ? target.maxInFlight : null;
  };
  const busy = (key: string) => (sendingTo.get(key) ?? 0) >= Math.min(endpointCap(), inFlightCapOf(key) ?? Infinity);
  /** Deliveries waiting for their endpoint's rate (rateLimitPerS) or a slot of its cap, by endpoint key. */
  const pacers = new Map<string, { queue: Sendable[]; tokens: number; window: number; pumping: boolean; returned: number }>();
  /**
   * The order deliveries were first routed in: those whose rate slots were spent go back to the
   * head of their endpoint's queue in it (`returned` of them lead it), whatever order their
   * attempts ended in, so that a second's spent slots are followed in the next one as they were sent.
   */
  const routedOrder = new WeakMap<Sendable, number>();
  let nextOrder = 0;
  /** An endpoint that keeps failing is sent a probe a second (breaker.ts). */
  const breaker = endpointBreaker();
  /** Its rate now (its rateLimitPerS, or the probes' while it keeps failing), while it is active; null: none. */
  const limitOf = (key: string) => {
    const target = deps.targetOf(key);
    return target?.status === 'active' ? breaker.rateOf(target, deps.clock().getTime()) : null;
  };
  /** How many of its attempts may wait here for its rate or its slots: a second's worth, or one round of its cap. */
  const waitingLimit = (t: Pick<EndpointTarget, 'rateLimitPerS' | 'maxInFlight'>) =>
    t.rateLimitPerS === null && t.maxInFlight === null ? endpointCap() : Math.min(t.rateLimitPerS ?? Infinity, t.maxInFlight ?? Infinity);
  /** Enough of its attempts wait already: the endpoint is left out of claims until they go. */
  const throttled = (t: EndpointTarget) =>
    (pacers.get(t.key)?.queue.length ?? 0) >= waitingLimit({ rateLimitPerS: limitOf(t.key), maxInFlight: t.maxInFlight });

  // An endpoint's maxInFlight holds across every instance: this worker reserves slots in the
  // endpoint's row (as `holder`) before it sends, and gives each back once its attempt has ended.
  const holder = randomBytes(9).toString('base64url');
  /** Slots held (reserved, not given back) and slots in use by an attempt in flight, by endpoint key. */
  const slotsHeld = new Map<string, number>();
  const slotsUsed = new Map<string, number>();
  const bump = (map: Map<string, number>, key: string, by: number) => {
    const n = (map.get(key) ?? 0) + by;
    if (n <= 0) map.delete(key);
    else map.set(key, n);
  };
  /** How long a holder's reservation counts without news of it: an attempt ends within timeoutMs. */
  const slotsTtlS = deps.slotsTtlS;
  /** Keys whose held count must be written to the row, and the keys whose write is under way (one at a time per key). */
  const toWrite = new Set<string>();
  const writing = new Map<string, Promise<void>>();
  let reservedAny = false;
  /** A reservation under way, by key: a write of the held count waits for it (one write at a time per key). */
  const reserving = new Map<string, Promise<number>>();

  /** Gives back `n` slots of the endpoint: the row is written with the count still held. */
  function giveBack(key: string, n: number): void {
    if (n <= 0) return;
    bump(slotsHeld, key, -n);
    writeHeld(key);
  }

  /**
   * Writes the endpoint's row with the absolute count this worker holds now (read when the write
   * starts, so that what changes meanwhile goes in the next write); retried until it succeeds.
   */
  function writeHeld(key: string): void {
    toWrite.add(key);
    if (writing.has(key)) return;
    writing.set(key, (async () => {
      await reserving.get(key);
      while (toWrite.delete(key)) {
        try {
          await releaseInFlightSlots(deps.db, { key, holder, held: slotsHeld.get(key) ?? 0, ttlS: slotsTtlS });
        } catch (err) {
          // Written later; meanwhile they run out on their own (slotsTtlS).
          toWrite.add(key);
          deps.warn(err, 'could not give back an endpoint in-flight slot; retrying');
          if (deps.stopped()) break;
          await new Promise((resolve) => setTimeout(resolve, deps.pollMs).unref());
        }
      }
      writing.delete(key);
      // Another instance's attempts may be waiting for them; ours too.
      if (pacers.has(key)) void pump(key);
    })());
  }
  /** Sends now, or once its endpoint's rate and cap allow (attempts waiting for them take no concurrency). */
  function route(delivery: Sendable, first = false): void {
    const key = delivery.urlKey;
    if (limitOf(key) === null && inFlightCapOf(key) === null && !busy(key) && !pacers.has(key)) return send(delivery);
    let pacer = pacers.get(key);
    if (!pacer) pacers.set(key, (pacer = { queue: [], tokens: 0, window: 0, pumping: false, returned: 0 }));
    if (!routedOrder.has(delivery)) routedOrder.set(delivery, nextOrder++);
    if (first) {
      const order = routedOrder.get(delivery)!;
      let at = 0;
      while (at < pacer.returned && routedOrder.get(pacer.queue[at]!)! < order) at++;
      pacer.queue.splice(at, 0, delivery);
      pacer.returned++;
    } else pacer.queue.push(delivery);
    void pump(key);
  }

  /**
   * Sends an endpoint's waiting attempts as its cap and rate allow: slots of each second, and
   * slots of its maxInFlight, are reserved in the database, so that every instance together stays
   * within rateLimitPerS and maxInFlight. Called again when one of its attempts ends.
   */
  async function pump(key: string): Promise<void> {
    const pacer = pacers.get(key);
    if (!pacer || pacer.pumping) return;
    pacer.pumping = true;
    try {
      while (pacer.queue.length > 0 && !deps.stopped() && !busy(key)) {
        const limit = limitOf(key);
        const cap = inFlightCapOf(key);
        const wasThrottled = pacer.queue.length >= waitingLimit({ rateLimitPerS: limit, maxInFlight: cap });
        // Its rate first: the second's slots (waiting for the next second holds none of its in-flight slots).
        if (limit !== null) {
          const nowMs = deps.clock().getTime();
          const window = Math.floor(nowMs / 1000);
          if (pacer.window !== window) {
            pacer.window = window;
            pacer.tokens = 0;
          }
          if (pacer.tokens === 0) {
            pacer.tokens = await reserveRateSlots(deps.db, key, window, Math.min(pacer.queue.length, limit), limit).catch((err) => {
              deps.warn(err, 'could not reserve an endpoint rate slot; retrying');
              return 0;
            });
            if (pacer.tokens === 0) {
              await new Promise((resolve) => setTimeout(resolve, 1000 - (nowMs % 1000) + 1).unref());
              continue;
            }
          }
        }
        // Then its in-flight slots, unless some reserved are still unused.
        if (cap !== null && (slotsHeld.get(key) ?? 0) <= (slotsUsed.get(key) ?? 0)) {
          const room = Math.min(endpointCap(), cap) - (sendingTo.get(key) ?? 0);
          const want = Math.min(pacer.queue.length, room, limit === null ? Infinity : pacer.tokens);
          reservedAny = true;
          await writing.get(key);
          const reservation = reserveInFlightSlots(deps.db, { key, holder, held: slotsHeld.get(key) ?? 0, want, limit: cap, ttlS: slotsTtlS }).then(
            (granted) => {
              // Counted before anything awaiting this reservation runs: a write of the held count
              // waiting for it must include these slots, or the row would show fewer than are used.
              if (granted > 0) bump(slotsHeld, key, granted);
              return granted;
            },
            (err) => {
              // It may have been written without our learning it: the count held is written again.
              deps.warn(err, 'could not reserve an endpoint in-flight slot; retrying');
              return -1;
            },
          );
          reserving.set(key, reservation);
          const granted = await reservation.finally(() => reserving.delete(key));
          if (granted < 0) writeHeld(key);
          if (granted <= 0) {
            // Every slot is held elsewhere: look again shortly (they are given back as attempts end).
            await new Promise((resolve) => setTimeout(resolve, granted === 0 ? IN_FLIGHT_POLL_MS : deps.pollMs).unref());
            continue;
          }
        }
        while (pacer.queue.length > 0 && !busy(key) && (limit === null || pacer.tokens > 0)) {
          if (cap !== null && (slotsHeld.get(key) ?? 0) <= (slotsUsed.get(key) ?? 0)) break;
          // The second its rate slots were reserved for has passed while they were reserved (or
          // its in-flight slots were): they are spent, never used in the next second on top of
          // its own (a slow database would otherwise let a second's sends go over the rate).
          if (limit !== null && Math.floor(deps.clock().getTime() / 1000) !== pacer.window) break;
          const delivery = pacer.queue.shift()!;
          if (pacer.returned > 0) pacer.returned--;
          if (limit !== null) {
            pacer.tokens--;
            delivery.window = pacer.window;
          } else delete delivery.window;
          if (cap !== null) {
            delivery.slot = true;
            bump(slotsUsed, key, 1);
          }
          send(delivery);
        }
        if (wasThrottled && pacer.queue.length < waitingLimit({ rateLimitPerS: limit, maxInFlight: cap })) deps.wake();
      }
    } finally {
      pacer.pumping = false;
      if (pacer.queue.length === 0) pacers.delete(key);
      // Slots reserved and not used (the queue emptied, or the cap was lifted): given back.
      const surplus = (slotsHeld.get(key) ?? 0) - (slotsUsed.get(key) ?? 0);
      if (surplus > 0 && (pacer.queue.length === 0 || deps.stopped() || inFlightCapOf(key) === null)) giveBack(key, surplus);
    }
  }


  let inFlight = 0;
  function send(delivery: Sendable): void {
    inFlight++;
    const key = delivery.urlKey;
    sendingTo.set(key, (sendingTo.get(key) ?? 0) + 1);
    let again = false;
    void deps
      .attempt(delivery)
      .then((result) => void (again = result === 'again'))
      .finally(() => {
        inFlight--;
        const left = sendingTo.get(key)! - 1;
        if (left === 0) sendingTo.delete(key);
        else sendingTo.set(key, left);
        if (delivery.slot) {
          // Given back at once, not kept for this instance's next attempt: other instances' turn too.
          bump(slotsUsed, key, -1);
          giveBack(key, 1);
        } else if (pacers.has(key)) void pump(key);
        if (again) {
          // Its second's slot is spent, unused (never used in a later second, on top of that
          // second's own): back at the head of its endpoint's queue for the next second's, behind
          // the spent ones routed before it.
          delete delivery.slot;
          delete delivery.window;
          route(delivery, true);
        }
      });
  }

  return {
    route,
    throttled,
    record: (key, ok) => breaker.record(key, ok),
    inFlight: () => inFlight,
    takeWaiting() {
      const waiting: Sendable[] = [];
      for (const pacer of pacers.values()) {
        waiting.push(...pacer.queue.splice(0));
        pacer.returned = 0;
      }
      return waiting;
    },
    async release() {
      await Promise.all([...writing.values()]);
      if (reservedAny) {
        await releaseInFlightSlots(deps.db, { holder, ttlS: slotsTtlS }).catch((err) => deps.warn(err, 'could not give back the endpoint in-flight slots'));
      }
    },
  };
}
