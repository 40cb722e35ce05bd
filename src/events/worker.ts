import { randomBytes } from 'node:crypto';
import type { Tracer } from '@opentelemetry/api';
import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import { Agent } from 'undici';
import { receiverConnector } from './receiver-address.js';
import { isStorageUnavailable } from '../db/storage-errors.js';
import type { Tables } from '../db/types.js';
import type { IngestLoad } from '../timing/ingest-load.js';
import { failedAttemptLevel } from './attempt-log.js';
import { attemptTrace } from './attempt-trace.js';
import { leaseKeeper } from './lease.js';
import type { DeliveryHandoff } from './handoff.js';
import type { EndpointTarget } from './endpoints/registry.js';
import { endpointHealth } from './endpoint-health.js';
import { endpointPacer } from './pacer.js';
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
/** Rate slots one attempt may let pass unused while its lease is renewed (see attempt). */
export const SPENT_SLOTS_MAX = 2;
/** Deliveries claimed per pollMs while callback ingest is busy: progress, at a cost ingest does not feel. */
export const TRICKLE_CLAIM = 16;

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
  // The configured endpoints whose dispatch position is known to exist (started at the first claim
  // that sees them). An API endpoint's position is written with its row and deleted with it, in
  // their transactions: never started here, where the endpoints are a read up to REFRESH_MS old and
  // one deleted since would get its position back (and deliveries nothing would ever end).
  const started = new Set<string>();
  const active = () => deps.endpoints.targets().filter((t) => t.status === 'active');
  const targetOf = (key: string) => deps.endpoints.targets().find((t) => t.key === key);
  // No redirects: undici's dispatcher follows none unless told to.
  // No link-local receivers (cloud metadata): an address, or a name resolving to one, fails before a byte is sent (receiver-address.ts).
  const agent = new Agent({ connections: concurrency, keepAliveTimeout: 10_000, connect: receiverConnector({ timeout: deps.timeoutMs }) });

  let stopped = false;
  // Attempts in flight are cut short at shutdown: their deliveries are released for the next claim.
  const attempting = new Set<AttemptSignal>();
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
  const sends = new Set<Promise<void | 'again'>>();
  /** Each endpoint's pace: its share of the attempts, its rate and cap, the probes when it keeps failing. */
  const pacer = endpointPacer({
    db: deps.db,
    clock: deps.clock,
    concurrency,
    active,
    targetOf,
    pollMs,
    slotsTtlS: leaseS,
    stopped: () => stopped,
    warn: (err, message) => warnStorage(err, message),
    wake: () => wake(),
    attempt: (delivery) => {
      const sending = attempt(delivery).finally(() => sends.delete(sending));
      sends.add(sending);
      return sending;
    },
  });
  /** Each endpoint's continuous failure (failing_since), and its disabling once that lasts. */
  const health = endpointHealth({
    db: deps.db,
    disableAfterS: deps.disableAfterS,
    log: deps.log,
    stopped: () => stopped,
    warn: (err, message) => warnStorage(err, message),
  });
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
    while (!stopped && pacer.inFlight() < concurrency) {
      let limit = concurrency - pacer.inFlight();
      // pressed: the first moments of a burst, before busy() trusts it to last.
      if (!catchingUp && (deps.ingest?.busy() || deps.ingest?.pressed())) {
        // Answering the provider comes first: on a busy instance pushing would take the CPU and
        // the database time that callbacks need. The backlog goes out once ingest is idle again.
        if (Date.now() < trickleAt) return;
        trickleAt = Date.now() + pollMs;
        limit = Math.min(limit, TRICKLE_CLAIM);
      }
      // An endpoint with a second's worth of attempts waiting for its rate is left out until they go.
      const targets = active().filter((t) => !pacer.throttled(t));
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
        const fresh = targets.filter((t) => t.managed === 'config' && !started.has(t.key));
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
        else pacer.route(dispatchedSendable(delivery, lease, dispatchedAt, dispatchedAt.getTime() + leaseS * 1000));
      }
      for (const delivery of claimed) {
        held.delete(delivery.customer_uuid);
        pacer.route(claimedSendable(delivery, lease, claimedAt.getTime() + leaseS * 1000));
      }
      if (!dispatched.full && dispatched.deliveries.length + claimed.length < limit) {
        if (wantClaim) catchingUp = false;
        // Nothing due, nothing of ours in flight: no one here is waiting behind anything.
        if (pacer.inFlight() === 0) held.clear();
        return;
      }
    }
    saturated = !stopped;
  }

  async function attempt(delivery: Sendable): Promise<void | 'again'> {
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
    // The renewal took its rate slot's second past (a slow database): sent now, it would go over the
    // endpoint's rate beside the slots of the second it is signed in. Not sent: the pacer gives it
    // a later second's slot. At most SPENT_SLOTS_MAX times for one attempt: a database that takes
    // over a second for every renewal would hold it back for good; then it goes late, as it would
    // have before. Stopping, it goes on to be cut short like every other.
    if (!stopped && delivery.window !== undefined && Math.floor(at.getTime() / 1000) !== delivery.window && (delivery.spentSlots ?? 0) < SPENT_SLOTS_MAX) {
      delivery.spentSlots = (delivery.spentSlots ?? 0) + 1;
      return 'again';
    }
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
    const { result, finished: outcome } = attemptOutcome(delivery, answer, done, { horizonS: deps.horizonS, stopping: stopped });
    const finishedAttempt = { ...outcome, url: target.shown };
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
      if (result !== 'interrupted') pacer.record(target.key, error === null);
      health(target, error === null, done, error);
    }
    outcomes.add(finishedAttempt, delivery.claimed || (finishedAttempt.status !== 'pending' && held.delete(delivery.customer)));
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
      const releaseWaiting = async () => {
        for (const d of pacer.takeWaiting()) await releaseDeliveries(deps.db, [d.id], d.token).catch(() => {});
      };
      await releaseWaiting();
      await Promise.all([...sends]);
      // Again: one whose rate slot was spent just as the stop came went back to its endpoint's queue
      // after the first take.
      await releaseWaiting();
      await outcomes.flushing;
      // Every in-flight slot this worker still holds: for the other instances at once.
      await pacer.release();
      await agent.close();
    },
  };
}
