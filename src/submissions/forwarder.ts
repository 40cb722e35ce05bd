import { setTimeout as delay } from 'node:timers/promises';
import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { Clock } from '../deps.js';
import { isStorageUnavailable } from '../db/storage-errors.js';
import type { Tables } from '../db/types.js';
import { TokenUnavailableError } from '../provider/errors.js';
import type { Pacer, Permit } from '../provider/pacing.js';
import type { UnderwritingRequest } from '../provider/schemas.js';
import type { UnderwritingClient } from '../provider/underwriting-client.js';
import { markSubmitFailed, SEND_WINDOW_MS } from '../requests/sql.js';
import { limiter } from '../timing/limiter.js';
import { contextOfTraceparent, type SpanParent } from '../tracing/spans.js';
import type { Tracer } from '@opentelemetry/api';
import { certainlyNotReceived, circuitOutcome, describeFailure, holdOf } from './failure.js';
import { anyQueued, type ClaimedSubmit, claimNextQueued, markForwarded, type Returned, returnToQueue } from './queue.js';
import type { ForwardOutcome } from './metrics.js';
import type { Sealer } from './seal.js';

/**
 * Every instance runs one: it takes a provider slot (pacing.ts, behind synchronous submits),
 * claims the oldest queued request, and forwards it. A request the provider certainly did not
 * receive goes back to the queue in its place; any other failure ends it submit_failed, as a
 * synchronous submit would (docs/provider-pacing.md).
 */

/** While nothing is queued, the queue is looked at this often (a submit on this instance wakes it at once). */
export const IDLE_POLL_MS = 1000;
/**
 * Each claim starts its walk of the queue after the request this instance claimed last (the claim
 * statement says why: the entries of claimed requests stay in the queue's index until a vacuum, and
 * a walk from the start steps over all of them). At least this often, and whenever a walk from
 * there finds nothing, a claim walks the whole queue: what the other instance gave back to the
 * queue, and a batch that committed after later ids were claimed, are behind that start.
 */
export const FULL_WALK_MS = 1000;
/** After a database failure, the loop waits this long before trying again. */
const STORAGE_RETRY_MS = 1000;
/** A bearer token that cannot be had holds the queue this long before the next try (it is not the provider's failure). */
const TOKEN_HOLD_S = 1;
/**
 * The forwards' own writes (slot returns, outcomes, returns to the queue) run this many at once at
 * most, whatever PROVIDER_MAX_IN_FLIGHT: with the loop's one statement, the pacer's ask and its
 * returns (RETURNS_AT_ONCE), they fit the pacing pool (PACING_POOL_SIZE, db/handle.ts), which the
 * routes' statements do not use.
 */
export const FORWARD_WRITES = 3;

/** What a queued body that no configured key opens says (CPF_HASH_KEY rotated away, or a tampered row); it was never sent. */
export const NOT_SENT_UNREADABLE = 'not sent: the queued request could not be read back (was CPF_HASH_KEY replaced without keeping the old key?)';

export interface ForwarderDeps {
  db: Kysely<Tables>;
  client: Pick<UnderwritingClient, 'submitUnderwriting'>;
  pacer: Pacer;
  sealer: Sealer;
  clock: Clock;
  log: FastifyBaseLogger;
  /** Scrubbed from anything the provider says before it is stored. */
  partnerToken: string | undefined;
  tracer: Tracer | undefined;
  /** Told the customer once a forward's outcome is committed (long-polls wake). */
  announce?: (customerUuid: string) => void;
  /** Counts forwards by what became of them. */
  counted?: (outcome: ForwardOutcome) => void;
}


export interface Forwarder {
  /** Something was queued: look now rather than at the next idle poll. */
  wake(): void;
  /** Stops claiming; waits for the forwards in flight (each within UPSTREAM_TIMEOUT_MS). */
  stop(): Promise<void>;
}

export function startForwarder(deps: ForwarderDeps): Forwarder {
  let stopping = false;
  const stopped = new AbortController();
  let wakeUp: (() => void) | undefined;
  const inFlight = new Set<Promise<void>>();
  const write = limiter(FORWARD_WRITES);
  // Where the next claim's walk starts (FULL_WALK_MS): after the last claimed id, 0 for the whole
  // queue; and the lowest id this instance put back in the queue since (committed: the next claim sees it).
  let walkFrom = 0;
  let lastFullWalk = -Infinity;
  let returnedLow = Infinity;
  const putBack = (id: number) => {
    returnedLow = Math.min(returnedLow, id);
  };

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        wakeUp = undefined;
        resolve();
      }
      wakeUp = done;
    });

  async function loop(): Promise<void> {
    // The first look waits a poll too: the app's first requests (and their connections) come first.
    await sleep(IDLE_POLL_MS);
    // Whether the queue may be empty: looked at (a read, no slot taken) only then, not before every
    // forward: while the queue drains, each claim that finds a request says there may be more.
    let mayBeEmpty = true;
    while (!stopping) {
      try {
        if (mayBeEmpty) {
          if (!(await anyQueued(deps.db))) {
            await sleep(IDLE_POLL_MS);
            continue;
          }
          mayBeEmpty = false;
        }
        const paced = await deps.pacer.acquire({ priority: 'queue', signal: stopped.signal });
        if ('refused' in paced) {
          // Stopping, or the pacer closed (the app is closing): nothing more is claimed.
          if (!stopping) await sleep(IDLE_POLL_MS);
          continue;
        }
        const { permit } = paced;
        if (stopping) {
          await permit.release('not_called');
          break;
        }
        const fullWalk = walkFrom === 0 || performance.now() - lastFullWalk >= FULL_WALK_MS;
        const low = returnedLow;
        returnedLow = Infinity;
        const claimFrom = (after: number) => {
          if (after === 0) lastFullWalk = performance.now();
          return claimNextQueued(deps.db, deps.clock(), after).catch(async (err: unknown) => {
            putBack(low);
            await permit.release('not_called');
            throw err;
          });
        };
        // Nothing past the last claim: the whole queue is walked at once, on the same slot.
        const claimed = (await claimFrom(fullWalk ? 0 : Math.min(walkFrom, low - 1))) ?? (fullWalk ? undefined : await claimFrom(0));
        if (!claimed) {
          mayBeEmpty = true;
          walkFrom = 0;
          await permit.release('not_called');
          continue;
        }
        walkFrom = claimed.id;
        const forward = guarded(forwardOne(claimed, permit)).finally(() => inFlight.delete(forward));
        inFlight.add(forward);
      } catch (err) {
        if (isStorageUnavailable(err)) deps.log.warn({ err: { message: (err as Error).message } }, 'forwarder: database unavailable');
        else deps.log.error({ err }, 'forwarder failed');
        await delay(STORAGE_RETRY_MS);
      }
    }
  }

  async function forwardOne(claimed: ClaimedSubmit, permit: Permit): Promise<void> {
    const claimedAt = performance.now();
    const { id, customer_uuid: customerUuid } = claimed;
    const plain = claimed.queued_body === null ? undefined : deps.sealer.open(claimed.queued_body, customerUuid);
    if (plain === undefined) {
      await write(() => permit.release('not_called'));
      await fail(id, customerUuid, { upstreamStatus: null, error: NOT_SENT_UNREADABLE });
      deps.log.error({ customerUuid }, 'forwarder: a queued request could not be read back; stored as submit_failed, nothing sent');
      return;
    }
    const body = JSON.parse(plain) as UnderwritingRequest;
    if (!permit.fresh()) {
      // Claiming took the slot past its second: back in its place, unsent, before the slot goes
      // back (so the next claim takes it again, in order).
      let returned: Returned;
      try {
        returned = await write(() => returnToQueue(deps.db, id, deps.sealer.seal(plain, customerUuid), null, deps.clock()));
        if (returned === 'queued') putBack(id);
      } finally {
        await write(() => permit.release('not_called'));
      }
      if (returned === 'cancelled') cancelledMeanwhile(customerUuid);
      return;
    }
    const trace: SpanParent | undefined = deps.tracer && { tracer: deps.tracer, context: contextOfTraceparent(claimed.traceparent) };
    try {
      const { status } = await deps.client.submitUnderwriting(body, {
        sendBy: claimedAt + SEND_WINDOW_MS,
        ...(claimed.x_request_id === null ? {} : { requestId: claimed.x_request_id }),
        trace,
      });
      // Given back in mark_forwarded (one statement, not two); a probe's answer goes back on its own.
      const slot = permit.handOver();
      if (!slot) await write(() => permit.release('answered'));
      try {
        await write(() => markForwarded(deps.db, id, status, deps.clock(), slot));
        slot?.settled(true);
      } catch (err) {
        slot?.settled(false);
        throw err;
      }
      deps.announce?.(customerUuid);
      deps.counted?.('submitted');
      deps.log.info({ customerUuid, upstreamStatus: status }, 'forwarded: the provider accepted a queued request');
    } catch (err) {
      const failure = describeFailure(err, [body.cpf, deps.partnerToken]);
      const giveBack = () =>
        write(() => (err instanceof TokenUnavailableError ? permit.release('not_called', TOKEN_HOLD_S) : permit.release(circuitOutcome(err), holdOf(err))));
      if (certainlyNotReceived(err)) {
        // Back in its place before the slot is: no later request can be sent ahead of it meanwhile.
        let returned: Returned;
        try {
          returned = await write(() => returnToQueue(deps.db, id, deps.sealer.seal(plain, customerUuid), failure.stored, deps.clock()));
          // Back in its place: this instance's next claim walks from there.
          if (returned === 'queued') putBack(id);
        } finally {
          await giveBack();
        }
        if (returned === 'cancelled') {
          cancelledMeanwhile(customerUuid);
          return;
        }
        deps.counted?.('requeued');
        deps.log.info({ customerUuid, upstreamStatus: failure.stored.upstreamStatus, code: failure.error.code }, 'forward not received by the provider: queued again');
        return;
      }
      await giveBack();
      await fail(id, customerUuid, failure.stored);
      deps.log.warn({ customerUuid, upstreamStatus: failure.stored.upstreamStatus, code: failure.error.code }, 'forward failed (possibly received): stored as submit_failed');
    }
  }

  /** Its campaign was cancelled while it was being sent, and the provider never got it: it ends cancelled, not queued. */
  function cancelledMeanwhile(customerUuid: string): void {
    deps.announce?.(customerUuid);
    deps.counted?.('cancelled');
    deps.log.info({ customerUuid }, 'forward not received by the provider, and its campaign was cancelled meanwhile: cancelled');
  }

  async function fail(id: number, customerUuid: string, stored: { upstreamStatus: number | null; error: string }): Promise<void> {
    if (await write(() => markSubmitFailed(deps.db, id, stored, deps.clock()))) deps.announce?.(customerUuid);
    deps.counted?.('submit_failed');
  }

  /** A forward whose outcome could not be written stays `submitting`: the expiry sweep ends it as abandoned (possibly received). */
  function guarded(forward: Promise<void>): Promise<void> {
    return forward.catch((err: unknown) =>
      deps.log.error({ err: { message: (err as Error).message } }, 'forwarder: the outcome of a forward could not be recorded'),
    );
  }

  const running = loop();
  return {
    wake() {
      wakeUp?.();
    },
    async stop() {
      stopping = true;
      stopped.abort();
      wakeUp?.();
      await running;
      await Promise.all(inFlight);
    },
  };
}
