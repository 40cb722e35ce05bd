import { randomBytes } from 'node:crypto';
import type { Tracer } from '@opentelemetry/api';
import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import { Agent } from 'undici';
import { isStorageUnavailable } from '../db/storage-errors.js';
import type { Tables } from '../db/types.js';
import type { IngestLoad } from '../timing/ingest-load.js';
import { failedAttemptLevel } from './attempt-log.js';
import { attemptTrace } from './attempt-trace.js';
import { endpointBreaker } from './breaker.js';
import { leaseKeeper } from './lease.js';
import type { DeliveryHandoff } from './handoff.js';
import type { EndpointTarget } from './endpoints/registry.js';
import { recordEndpointFailing, disableFailingEndpoint, releaseInFlightSlots, reserveInFlightSlots, reserveRateSlots } from './endpoint-limits-sql.js';
import { outcomeWriter } from './outcome-writer.js';
import { type ClaimedDelivery, claimDeliveries, type DispatchedDelivery, dispatchDeliveries, releaseDeliveries, startDispatch } from './queue-sql.js';
import { type AttemptAnswer, attemptOutcome } from './retry-policy.js';
import { claimedSendable, dispatchedSendable, type Sendable } from './sendable.js';
import { abortAttempt, AttemptSignal, sendAttempt } from './sender.js';

export interface DeliveryWorkerDeps {
  db: Kysely<Tables>;
  /** The endpoints as last read: only the active ones are sent to. */
  endpoints: { targets(): readonly EndpointTarget[] };
  clock: () => Date;
  timeoutMs: number;
  horizonS: number;
  /** An endpoint whose every attempt has failed for this long becomes disabled. */
  disableAfterS: number;
  log: Pick<FastifyBaseLogger, 'info' | 'warn' | 'error' | 'debug'>;
  /** Told each attempt's result, and for a delivery the seconds from the event to its 2xx. */
  onResult?: (result: 'delivered' | 'failed' | 'dead', lagS?: number) => void;
  /** Attempts in flight at most (one instance). */
  concurrency?: number;
  /** Looks for due work at least this often, notifications or not (retries, other instances' leases). */
  pollMs?: number;
  /**
   * This instance's callback ingest: while it is busy, deliveries go out as a trickle (one small
   * claim per pollMs); once it is not, the whole backlog goes out before the worker yields again.
   */
  ingest?: Pick<IngestLoad, 'busy' | 'pressed' | 'onIdle'>;
  /** Set when tracing is on: each attempt is a client span (see attempt-trace.ts). */
  tracer?: Tracer | undefined;
}

export interface DeliveryWorker extends DeliveryHandoff {
  /** Something is due now (a redelivery): look at once. */
  wake(): void;
  /** Something may be due (a change committed on some instance): look soon. */
  nudge(): void;
  /** Stops claiming, waits for attempts in flight and writes their finished. */
  stop(): Promise<void>;
}

/** How long a wake waits before it claims: whatever is freed or due meanwhile shares one claim. */
const CLAIM_GATHER_MS = 5;
/**
 * How long this instance's own commit waits before its events' deliveries are written: the
 * commits meanwhile share one dispatch (under load, a dispatch per commit would cost the database
 * more than the commits' deliveries themselves).
 */
const COMMIT_GATHER_MS = 10;
/**
 * How long a nudge (a change committed on some instance) waits: what this instance writes it
 * is told of at once (committed), so a nudge mostly matters for another instance's events.
 */
const NUDGE_GATHER_MS = 100;
/** Deliveries claimed per pollMs while callback ingest is busy: progress, at a cost ingest does not feel. */
export const TRICKLE_CLAIM = 16;
/**
 * How long an endpoint's waiting attempts wait before asking again for a slot of its maxInFlight
 * when every slot is held (by other instances: they give theirs back as their attempts end).
 */
export const IN_FLIGHT_POLL_MS = 50;

/**
 * Pushes outcome events. The statements that record events write no deliveries: this worker
 * writes them (dispatch), in batches, for the events past each target's position in the feed,
 * leased to itself, and sends them; everything else (retries, held deliveries, other instances'
 * expired leases) is claimed in batches under a lease (SKIP LOCKED, so instances share the work
 * and each sends a delivery once in normal operation). Each event is POSTed signed; finished are
 * written in batches. A crashed instance's leases run out and others take them over; events it
 * had not dispatched are past the position still, and the next dispatch (anywhere) writes them.
 */
export function startDeliveryWorker(deps: DeliveryWorkerDeps): DeliveryWorker {
  const concurrency = deps.concurrency ?? 64;
  const pollMs = deps.pollMs ?? 1000;
  // Long enough for one attempt and the write of it; short enough that a dead
  // instance's deliveries move on within seconds.
  const leaseS = deps.timeoutMs / 1000 + 5;
  const leases = leaseKeeper({ db: deps.db, clock: deps.clock, leaseS, onError: (err) => warnStorage(err, 'could not renew an event delivery lease') });
  // The endpoints whose dispatch position is known to exist (started at the first claim that sees them).
  const started = new Set<string>();
  const active = () => deps.endpoints.targets().filter((t) => t.status === 'active');
  const targetOf = (key: string) => deps.endpoints.targets().find((t) => t.key === key);
  // No redirects: undici's dispatcher follows none unless told to.
  const agent = new Agent({ connections: concurrency, keepAliveTimeout: 10_000, connect: { timeout: deps.timeoutMs } });

  let stopped = false;
  // Attempts in flight are cut short at shutdown: their deliveries are released for the next claim.
  const attempting = new Set<AttemptSignal>();
  let inFlight = 0;
  let claiming: Promise<void> | undefined;
  let again = false;
  let backoffUntil = 0;
  let trickleAt = 0;
  // Set when a burst of callbacks ends: the backlog it left goes out in full, even if answering
  // callbacks slows meanwhile (else the catching up itself would keep ingest busy and the backlog
  // would never drain). Cleared once nothing is due.
  let catchingUp = false;
  // Set when a claim stopped at the concurrency limit with work left: a finished attempt then
  // makes room for the next batch at once (not at the next poll).
  let saturated = false;
  const sends = new Set<Promise<void>>();
  const outcomes = outcomeWriter({
    db: deps.db,
    retryMs: pollMs,
    warn: (err, message) => warnStorage(err, message),
    stopping: () => stopped,
    // A delivered or dead delivery may free the customer's next one; room for a backlog's next batch.
    onWritten: (freed) => {
      if (freed || saturated) wake();
    },
  });
  /** Customers with a delivery waiting behind one being sent (see adopt). */
  const held = new Set<string>();
  const token = () => randomBytes(12).toString('base64url');

  let soon: NodeJS.Timeout | undefined;
  let soonMs = 0;
  // Whether the next round claims too, or only dispatches (this instance's commits need no claim).
  let claimWanted = true;

  /** Dispatches and claims a few milliseconds after the first wake: what comes meanwhile shares them. */
  function wake(gatherMs = CLAIM_GATHER_MS, claims = true): void {
    if (stopped) return;
    claimWanted ||= claims;
    if (soon) {
      if (gatherMs >= soonMs) return;
      clearTimeout(soon);
    }
    soonMs = gatherMs;
    soon = setTimeout(claimNow, gatherMs);
  }

  function claimNow(): void {
    soon = undefined;
    if (stopped) return;
    if (claiming) {
      again = true;
      return;
    }
    claiming = claim().finally(() => {
      claiming = undefined;
      if (again && !stopped) {
        again = false;
        claimNow();
      }
    });
  }

  async function claim(): Promise<void> {
    saturated = false;
    const wantClaim = claimWanted;
    claimWanted = false;
    if (Date.now() < backoffUntil) return;
    while (!stopped && inFlight < concurrency) {
      let limit = concurrency - inFlight;
      // pressed: the first moments of a burst, before busy() trusts it to last.
      if (!catchingUp && (deps.ingest?.busy() || deps.ingest?.pressed())) {
        // Answering the provider comes first: on a busy instance pushing would take the CPU and
        // the database time that callbacks need. The backlog goes out once ingest is idle again.
        if (Date.now() < trickleAt) return;
        trickleAt = Date.now() + pollMs;
        limit = Math.min(limit, TRICKLE_CLAIM);
      }
      // An endpoint with a second's worth of attempts waiting for its rate is left out until they go.
      const targets = active().filter((t) => !throttled(t));
      if (targets.length === 0) return;
      const keys = targets.map((t) => t.key);
      const lease = token();
      let dispatched: { full: boolean; deliveries: DispatchedDelivery[] };
      let dispatchedAt = new Date(0);
      let claimedAt = new Date(0);
      let claimed: ClaimedDelivery[] = [];
      try {
        const now = deps.clock();
        dispatchedAt = now;
        const fresh = targets.filter((t) => !started.has(t.key));
        if (fresh.length > 0) {
          await startDispatch(deps.db, fresh, now);
          for (const t of fresh) started.add(t.key);
        }
        // New events first (at most `limit` per target, so at most `limit` leased in all
        // with one target; more targets may go over by what they share).
        dispatched = await dispatchDeliveries(deps.db, { now, targets, limit: Math.max(1, Math.ceil(limit / targets.length)), leaseS, token: lease });
        const sent = dispatched.deliveries.filter((d) => d.lease_token !== null).length;
        if (wantClaim && sent < limit && !dispatched.full) {
          claimedAt = deps.clock();
          claimed = await claimDeliveries(deps.db, { now: claimedAt, keys, limit: limit - sent, leaseS, token: lease });
        }
      } catch (err) {
        backoffUntil = Date.now() + pollMs;
        warnStorage(err, 'could not claim event deliveries; retrying');
        return;
      }
      for (const delivery of dispatched.deliveries) {
        if (delivery.lease_token === null) held.add(delivery.customer_uuid);
        else route(dispatchedSendable(delivery, lease, dispatchedAt, dispatchedAt.getTime() + leaseS * 1000));
      }
      for (const delivery of claimed) {
        held.delete(delivery.customer_uuid);
        route(claimedSendable(delivery, lease, claimedAt.getTime() + leaseS * 1000));
      }
      if (!dispatched.full && dispatched.deliveries.length + claimed.length < limit) {
        if (wantClaim) catchingUp = false;
        // Nothing due, nothing of ours in flight: no one here is waiting behind anything.
        if (inFlight === 0) held.clear();
        return;
      }
    }
    saturated = !stopped;
  }

  /**
   * Attempts in flight to one endpoint at most (this instance): with several endpoints, a slow one
   * (answers after seconds) cannot take every slot from the others; alone, it has them all.
   */
  const endpointCap = () => Math.max(1, Math.ceil(concurrency / Math.min(4, Math.max(1, active().length))));
  const sendingTo = new Map<string, number>();
  /** Its maxInFlight (across every instance), while it is active; null: none. */
  const inFlightCapOf = (key: string) => {
    const target = targetOf(key);
    return target?.status === 'active' ? target.maxInFlight : null;
  };
  const busy = (key: string) => (sendingTo.get(key) ?? 0) >= Math.min(endpointCap(), inFlightCapOf(key) ?? Infinity);
  /** Deliveries waiting for their endpoint's rate (rateLimitPerS) or a slot of its cap, by endpoint key. */
  const pacers = new Map<string, { queue: Sendable[]; tokens: number; window: number; pumping: boolean }>();
  /** An endpoint that keeps failing is sent a probe a second (breaker.ts). */
  const breaker = endpointBreaker();
  /** Its rate now (its rateLimitPerS, or the probes' while it keeps failing), while it is active; null: none. */
  const limitOf = (key: string) => {
    const target = targetOf(key);
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
  const slotsTtlS = leaseS;
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
          warnStorage(err, 'could not give back an endpoint in-flight slot; retrying');
          if (stopped) break;
          await new Promise((resolve) => setTimeout(resolve, pollMs).unref());
        }
      }
      writing.delete(key);
      // Another instance's attempts may be waiting for them; ours too.
      if (pacers.has(key)) void pump(key);
    })());
  }
  /** Sends now, or once its endpoint's rate and cap allow (attempts waiting for them take no concurrency). */
  function route(delivery: Sendable): void {
    const key = delivery.urlKey;
    if (limitOf(key) === null && inFlightCapOf(key) === null && !busy(key) && !pacers.has(key)) return send(delivery);
    let pacer = pacers.get(key);
    if (!pacer) pacers.set(key, (pacer = { queue: [], tokens: 0, window: 0, pumping: false }));
    pacer.queue.push(delivery);
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
      while (pacer.queue.length > 0 && !stopped && !busy(key)) {
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
              warnStorage(err, 'could not reserve an endpoint rate slot; retrying');
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
              warnStorage(err, 'could not reserve an endpoint in-flight slot; retrying');
              return -1;
            },
          );
          reserving.set(key, reservation);
          const granted = await reservation.finally(() => reserving.delete(key));
          if (granted < 0) writeHeld(key);
          if (granted <= 0) {
            // Every slot is held elsewhere: look again shortly (they are given back as attempts end).
            await new Promise((resolve) => setTimeout(resolve, granted === 0 ? IN_FLIGHT_POLL_MS : pollMs).unref());
            continue;
          }
        }
        while (pacer.queue.length > 0 && !busy(key) && (limit === null || pacer.tokens > 0)) {
          if (cap !== null && (slotsHeld.get(key) ?? 0) <= (slotsUsed.get(key) ?? 0)) break;
          const delivery = pacer.queue.shift()!;
          if (limit !== null) pacer.tokens--;
          if (cap !== null) {
            delivery.slot = true;
            bump(slotsUsed, key, 1);
          }
          send(delivery);
        }
        if (wasThrottled && pacer.queue.length < waitingLimit({ rateLimitPerS: limit, maxInFlight: cap })) wake();
      }
    } finally {
      pacer.pumping = false;
      if (pacer.queue.length === 0) pacers.delete(key);
      // Slots reserved and not used (the queue emptied, or the cap was lifted): given back.
      const surplus = (slotsHeld.get(key) ?? 0) - (slotsUsed.get(key) ?? 0);
      if (surplus > 0 && (pacer.queue.length === 0 || stopped || inFlightCapOf(key) === null)) giveBack(key, surplus);
    }
  }

  function send(delivery: Sendable): void {
    inFlight++;
    const key = delivery.urlKey;
    sendingTo.set(key, (sendingTo.get(key) ?? 0) + 1);
    const sending = attempt(delivery).finally(() => {
      inFlight--;
      const left = sendingTo.get(key)! - 1;
      if (left === 0) sendingTo.delete(key);
      else sendingTo.set(key, left);
      sends.delete(sending);
      if (delivery.slot) {
        // Given back at once, not kept for this instance's next attempt: other instances' turn too.
        bump(slotsUsed, key, -1);
        giveBack(key, 1);
      } else if (pacers.has(key)) void pump(key);
    });
    sends.add(sending);
  }

  async function attempt(delivery: Sendable): Promise<void> {
    const target = targetOf(delivery.urlKey);
    const { body, token: lease } = delivery;
    if (target?.status !== 'active') {
      // Paused, disabled or deleted since it was claimed: not sent, and due again once it may be.
      await releaseDeliveries(deps.db, [delivery.id], lease).catch((err) => warnStorage(err, 'could not release an event delivery'));
      return;
    }
    // Its lease must outlast the attempt and the write of its outcome: renewed when it waited (lease.ts).
    if (!(await leases.hold(delivery))) return;
    const at = deps.clock();
    const signal = new AttemptSignal();
    const timer = setTimeout(abortAttempt, deps.timeoutMs, signal, true);
    attempting.add(signal);
    // Begun after stop() cut the others short (a claim that was under way): cut short at once.
    if (stopped) abortAttempt(signal, false);
    const traced = attemptTrace(deps.tracer, delivery, target);
    let answer: AttemptAnswer;
    try {
      answer = await sendAttempt(agent, target, { publicId: delivery.publicId, body, at, traceHeaders: traced.headers }, deps.timeoutMs, signal);
    } finally {
      clearTimeout(timer);
      attempting.delete(signal);
    }
    const { httpStatus, error } = answer;
    traced.finish(httpStatus, error, signal.timedOut);
    const done = deps.clock();
    const { result, finished: finishedAttempt } = attemptOutcome(delivery, answer, done, { horizonS: deps.horizonS, stopping: stopped });
    const attempts = delivery.attempts + 1;
    if (result === 'delivered') {
      deps.onResult?.('delivered', (done.getTime() - delivery.createdAt.getTime()) / 1000);
      deps.log.debug({ event: delivery.publicId, customerUuid: delivery.customer, url: target.shown, attempts, status: httpStatus }, 'event delivered');
    } else if (result === 'dead') {
      deps.onResult?.('dead');
      deps.log.warn({ event: delivery.publicId, customerUuid: delivery.customer, url: target.shown, attempts, status: httpStatus, error }, 'event delivery dead: no 2xx within the retry horizon');
    } else if (result === 'failed') {
      deps.onResult?.('failed');
      deps.log[failedAttemptLevel(delivery.queuedAt, done)](
        { event: delivery.publicId, customerUuid: delivery.customer, url: target.shown, attempts, status: httpStatus, error, nextAt: finishedAttempt.nextAt },
        'event delivery failed; will retry',
      );
    }
    if (finishedAttempt.error !== null || finishedAttempt.status === 'delivered') {
      if (result !== 'interrupted') breaker.record(target.key, error === null);
      health(target, error === null, done, error);
    }
    outcomes.add(finishedAttempt, delivery.claimed || (finishedAttempt.status !== 'pending' && held.delete(delivery.customer)));
  }

  /** Keys whose health write is under way: one at a time per endpoint. */
  const healthWriting = new Set<string>();

  /**
   * Tracks each endpoint's continuous failure (failing_since) and disables it once that lasts
   * disableAfterS. Written only when the state changes: in steady state an attempt costs nothing here.
   */
  function health(target: EndpointTarget, ok: boolean, at: Date, error: string | null): void {
    if (stopped && !ok) return;
    const since = target.failingSince;
    let write: (() => Promise<unknown>) | undefined;
    if (ok && since !== null) write = () => recordEndpointFailing(deps.db, target.key, null);
    else if (!ok && since === null) write = () => recordEndpointFailing(deps.db, target.key, at);
    else if (!ok && since !== null && at.getTime() - since.getTime() >= deps.disableAfterS * 1000) {
      write = async () => {
        const disabled = await disableFailingEndpoint(deps.db, { key: target.key, at, afterS: deps.disableAfterS, lastError: error ?? 'failed' });
        // Stops here at once; the registry's next read says so to every instance.
        if (disabled) target.status = 'disabled';
        if (disabled) deps.log.warn({ endpoint: target.id, url: target.shown, failingSince: since }, 'event endpoint disabled: every attempt failed for EVENT_ENDPOINT_DISABLE_AFTER_S');
      };
    }
    if (!write || healthWriting.has(target.key)) return;
    // Seen at once by this instance's next attempts; the registry's next read confirms it.
    target.failingSince = ok ? null : (since ?? at);
    healthWriting.add(target.key);
    void write()
      .catch((err) => warnStorage(err, 'could not record an event endpoint health'))
      .finally(() => healthWriting.delete(target.key));
  }

  function warnStorage(err: unknown, message: string): void {
    const detail = { err: { message: (err as Error).message } };
    if (isStorageUnavailable(err)) deps.log.warn(detail, message);
    else deps.log.error(detail, message);
  }

  const timer = setInterval(() => wake(), pollMs);
  timer.unref();
  const unsubscribeIdle = deps.ingest?.onIdle(() => {
    catchingUp = true;
    wake();
  });
  claimNow();

  return {
    wake: () => wake(),
    nudge: () => wake(NUDGE_GATHER_MS),
    committed: () => wake(COMMIT_GATHER_MS, false),
    async stop() {
      stopped = true;
      clearInterval(timer);
      unsubscribeIdle?.();
      clearTimeout(soon);
      for (const signal of attempting) abortAttempt(signal, false);
      await claiming;
      // Waiting for their endpoint's rate: given back unattempted, for the next claim anywhere.
      for (const pacer of pacers.values()) {
        for (const d of pacer.queue.splice(0)) await releaseDeliveries(deps.db, [d.id], d.token).catch(() => {});
      }
      await Promise.all([...sends]);
      await outcomes.flushing;
      // Every in-flight slot this worker still holds: for the other instances at once.
      await Promise.all([...writing.values()]);
      if (reservedAny) {
        await releaseInFlightSlots(deps.db, { holder, ttlS: slotsTtlS }).catch((err) => warnStorage(err, 'could not give back the endpoint in-flight slots'));
      }
      await agent.close();
    },
  };
}
