import { randomBytes } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { ProviderPacingConfig } from '../config/config.js';
import type { Tables } from '../db/types.js';
import { limiter } from '../timing/limiter.js';
import { type CallOutcome, ensureSlots, type Refusal, returnSlot, takeSlots } from './sql.js';

/**
 * The provider's pace for this instance's callers: waiters line up here (synchronous submits
 * before the queue's forwarder), and one ask at a time goes to the database (sql.ts), for as many
 * slots as there are waiters (at most MAX_SLOTS_PER_TAKE): a thousand waiting submits cost one
 * statement per batch of slots, neither a thousand polls nor a round trip each in turn. The pace
 * itself is the database's, shared by every instance.
 */

/** A slot to call the provider once; give it back with what the call told. */
export interface Permit {
  readonly probe: boolean;
  /**
   * False once the call could no longer reach the provider within a second it was counted in (its
   * own, or for a call of a second's tail the next one too; this process was slow to send it): give
   * it back unused and take another, or the provider would see it in a second that did not count it.
   */
  fresh(): boolean;
  /** Once; holdS: the provider's Retry-After, when it gave one. */
  release(outcome: CallOutcome, holdS?: number | null): Promise<void>;
  /**
   * For an answered call whose slot goes back in the caller's own statement (mark_submitted: one
   * commit, not two): the slot, instead of release('answered'). Undefined for the circuit's probe,
   * or once released: release it.
   */
  handOver(): SlotHandOver | undefined;
}

/** A slot an answered call gives back in the caller's statement (requests/sql.ts, MARK_SUBMITTED). */
export interface SlotHandOver {
  slot: number;
  holder: string;
  /** Once the statement is done; freed: it committed (else the slot's lease runs out by itself). */
  settled(freed: boolean): void;
}

export interface PaceRefusal {
  reason: Refusal | 'closing';
  /** Whole seconds until a call may be possible again, for a Retry-After header (at least 1). */
  retryAfterS: number;
}

export type AcquireResult = { permit: Permit } | { refused: PaceRefusal };

export interface AcquireOptions {
  /** performance.now() by which a slot must be had; unset: wait as long as it takes. */
  deadline?: number;
  /** Synchronous submits (a caller waiting) go before the queue. */
  priority: 'sync' | 'queue';
  /** Aborted: the waiter leaves, refused with reason closing (a worker that stops). */
  signal?: AbortSignal;
}

export interface Pacer {
  acquire(options: AcquireOptions): Promise<AcquireResult>;
  /** Refuses every waiter (reason closing) and every later acquire; slots given out stay valid until released. */
  close(): void;
}

/** Retry-After is believed up to this long; a longer one (or an HTTP date far ahead) is cut to it. */
export const MAX_HOLD_S = 600;
/** A call is sent at least this long before the end of its window (the last second it was counted in): the way to the provider. */
const SEND_MARGIN_MS = 300;
/** How often the first waiter asks again while every slot is in flight on other instances. */
const IN_FLIGHT_POLL_MS = 20;
/** While another instance's probe runs, the first waiter asks again this often. */
const PROBE_POLL_MS = 50;
/** The first waiter asks again at least this often, whatever the refusal said (a change elsewhere, a clock step). */
const MAX_WAIT_MS = 1000;
/**
 * Slot returns run this many at once at most (the forwarder's, failed synchronous calls', stale
 * permits', slots whose waiter left): a burst of them (up to MAX_SLOTS_PER_TAKE at once) never
 * holds the whole pacing pool (PACING_POOL_SIZE, db/handle.ts) ahead of the next take.
 */
export const RETURNS_AT_ONCE = 2;
/** Slots one ask takes at most for the waiters in line (the pace's own bounds come first). */
const MAX_SLOTS_PER_TAKE = 64;

interface Waiter {
  options: AcquireOptions;
  resolve: (result: AcquireResult) => void;
  reject: (err: unknown) => void;
}

export interface PacerDeps {
  db: Kysely<Tables>;
  config: ProviderPacingConfig;
  /** A slot's lease: past it, a slot whose instance died is free again. */
  leaseMs: number;
  log: FastifyBaseLogger;
  /** Told whenever the circuit's consecutive failures change state (opened, closed). */
  onCircuit?: (open: boolean) => void;
  /** Told what each ask of the database got: slots, or why none (diagnostics, tests). */
  onAsk?: (verdict: 'ok' | Refusal) => void;
}

/**
 * A permit that is still fresh when the caller is about to send (see Permit.fresh): one that went
 * stale between being given and being used goes back unused, and another is taken.
 */
export async function acquireFresh(pacer: Pacer, options: AcquireOptions): Promise<AcquireResult> {
  for (;;) {
    const result = await pacer.acquire(options);
    if ('refused' in result || result.permit.fresh()) return result;
    await result.permit.release('not_called');
  }
}

export function createPacer(deps: PacerDeps): Pacer {
  const { db, config } = deps;
  const instance = randomBytes(6).toString('hex');
  let sequence = 0;
  const sync: Waiter[] = [];
  const queue: Waiter[] = [];
  let asking = false;
  let timer: NodeJS.Timeout | undefined;
  /**
   * Set while the timer waits out a refusal that only time ends (the pace's next slot, a hold): no
   * new waiter, returned slot or answer here brings it sooner, so none asks before it fires (each
   * forward's acquire and its slot's return used to: two refused asks a call, each a statement
   * on the shared row). performance.now() when the refusal ends (the timer may fire before it:
   * MAX_WAIT_MS), so that a waiter that comes meanwhile is refused as the ask would refuse it.
   */
  let timedUntil: number | undefined;
  let closed = false;
  let slotsReady: Promise<void> | undefined;
  let circuitOpen = false;
  /** Why the last ask got no slot: what a waiter whose deadline passes is told. */
  let lastRefusal: Refusal = 'rate';
  const returning = limiter(RETURNS_AT_ONCE);

  const next = () => sync[0] ?? queue[0];
  const remove = (w: Waiter) => {
    const line = w.options.priority === 'sync' ? sync : queue;
    const i = line.indexOf(w);
    if (i >= 0) line.splice(i, 1);
  };

  function noteCircuit(open: boolean): void {
    if (open === circuitOpen) return;
    circuitOpen = open;
    deps.onCircuit?.(open);
    if (open) deps.log.warn({ failures: config.circuitFailures, openS: config.circuitOpenS }, 'provider circuit open: no calls until a probe succeeds');
    else deps.log.info('provider circuit closed: the provider answers again');
  }

  function permitOf(slot: number, holder: string, probe: boolean, usableUntil: number): Permit {
    let released = false;
    async function giveBack(outcome: CallOutcome, holdS: number | null): Promise<void> {
      try {
        const failures = await returning(() => returnSlot(db, {
          slot,
          holder,
          outcome,
          probe,
          holdS: holdS === null ? null : Math.min(holdS, MAX_HOLD_S),
          circuitFailures: config.circuitFailures,
          circuitOpenS: config.circuitOpenS,
        }));
        noteCircuit(failures >= config.circuitFailures);
      } catch (err) {
        // The lease runs out by itself; the outcome is lost for the circuit, not the call.
        deps.log.warn({ err: { message: (err as Error).message } }, 'could not give a provider slot back (its lease will run out)');
      }
      pump();
    }
    return {
      probe,
      fresh: () => performance.now() < usableUntil,
      async release(outcome, holdS = null) {
        if (released) return;
        released = true;
        await giveBack(outcome, holdS);
      },
      handOver() {
        if (released || probe) return undefined;
        released = true;
        return {
          slot,
          holder,
          settled(freed) {
            // An answer closes the circuit (the statement reset the failures). When the statement
            // failed, the slot goes back on its own (a no-op if it was freed after all), rather than
            // hold its place until its lease runs out.
            if (!freed) {
              void giveBack('answered', null);
              return;
            }
            noteCircuit(false);
            pump();
          },
        };
      },
    };
  }

  function refuseLate(refusal: Refusal, waitMs: number): void {
    const at = performance.now() + waitMs;
    for (const w of [...sync, ...queue]) {
      if (w.options.deadline !== undefined && w.options.deadline < at) {
        remove(w);
        w.resolve({ refused: { reason: refusal, retryAfterS: Math.max(1, Math.ceil(waitMs / 1000)) } });
      }
    }
  }

  async function ask(): Promise<void> {
    const waiter = next();
    if (!waiter) return;
    slotsReady ??= ensureSlots(db, config.maxInFlight).catch((err: unknown) => {
      slotsReady = undefined;
      throw err;
    });
    await slotsReady;
    // One holder per take: a slot's return names its slot and holder, so the slots of one take share it.
    const holder = `${instance}:${++sequence}`;
    // The permit's life counts from before the ask: the database's clock was read after it was sent,
    // and the way back (commit, network, event loop) must not lengthen it.
    const askedAt = performance.now();
    const taken = await takeSlots(db, config, holder, deps.leaseMs, Math.min(sync.length + queue.length, MAX_SLOTS_PER_TAKE));
    deps.onAsk?.(taken.slots !== null ? 'ok' : taken.refusal);
    if (taken.slots !== null) {
      const usableUntil = askedAt + taken.windowEndMs - taken.nowMs - SEND_MARGIN_MS;
      for (const slot of taken.slots) {
        const permit = permitOf(slot, holder, taken.probe, usableUntil);
        const first = next();
        if (first) {
          remove(first);
          first.resolve({ permit });
        } else {
          // The waiter left meanwhile (its deadline): the slot goes back unused.
          void permit.release('not_called');
        }
      }
      return;
    }
    lastRefusal = taken.refusal;
    if (taken.refusal === 'open') noteCircuit(true);
    // Unknown end (slots in flight elsewhere, another instance's probe running): ask again soon.
    const unknownMs = taken.refusal === 'open' ? PROBE_POLL_MS : IN_FLIGHT_POLL_MS;
    const endsInMs = taken.untilMs === null ? unknownMs : taken.untilMs - taken.nowMs;
    // Waiters whose deadline comes before the hold (or the open circuit) ends are answered now.
    refuseLate(taken.refusal, endsInMs);
    schedule(Math.max(1, Math.min(endsInMs, MAX_WAIT_MS)), taken.refusal === 'rate' || taken.refusal === 'held' ? performance.now() + endsInMs : undefined);
  }

  function schedule(ms: number, refusalEnds: number | undefined): void {
    if (timer !== undefined || closed) return;
    timedUntil = refusalEnds;
    timer = setTimeout(() => {
      timer = undefined;
      timedUntil = undefined;
      pump();
    }, ms);
  }

  /** While a timed refusal is waited out: a waiter that came meanwhile and cannot wait that long is answered now, as the ask would. */
  function refuseLateWhileTimed(): void {
    if (timedUntil !== undefined) refuseLate(lastRefusal, timedUntil - performance.now());
  }

  function pump(): void {
    if (asking || closed || !next()) return;
    if (timer !== undefined) {
      if (timedUntil !== undefined) return refuseLateWhileTimed();
      clearTimeout(timer);
      timer = undefined;
    }
    asking = true;
    ask().then(
      () => {
        asking = false;
        // A slot was given: the next waiter asks at once; a refusal has scheduled the next ask
        // (and a waiter that came during this one, and cannot wait for a timed refusal's end, is told now).
        if (timer === undefined) pump();
        else refuseLateWhileTimed();
      },
      (err: unknown) => {
        asking = false;
        const first = next();
        if (first) {
          remove(first);
          first.reject(err);
        }
        pump();
      },
    );
  }

  return {
    acquire(options) {
      // An already aborted signal never fires its abort event: without this, such a waiter (a worker
      // that stopped while it was on its way here) would wait for a slot however long the pace holds.
      if (closed || options.signal?.aborted) return Promise.resolve({ refused: { reason: 'closing', retryAfterS: 1 } });
      return new Promise<AcquireResult>((resolve, reject) => {
        let timer: NodeJS.Timeout | undefined;
        const leave = () => {
          if (!sync.includes(waiter) && !queue.includes(waiter)) return;
          remove(waiter);
          settle.resolve({ refused: { reason: options.signal?.aborted ? 'closing' : lastRefusal, retryAfterS: 1 } });
        };
        // However it ends, the waiter's timer and abort listener go with it.
        const settle = {
          resolve: (result: AcquireResult) => {
            clearTimeout(timer);
            options.signal?.removeEventListener('abort', leave);
            resolve(result);
          },
          reject: (err: unknown) => {
            clearTimeout(timer);
            options.signal?.removeEventListener('abort', leave);
            reject(err);
          },
        };
        const waiter: Waiter = { options, ...settle };
        (options.priority === 'sync' ? sync : queue).push(waiter);
        options.signal?.addEventListener('abort', leave, { once: true });
        if (options.deadline !== undefined) timer = setTimeout(leave, Math.max(0, options.deadline - performance.now()));
        pump();
      });
    },
    close() {
      closed = true;
      if (timer !== undefined) clearTimeout(timer);
      for (const w of [...sync, ...queue]) w.resolve({ refused: { reason: 'closing', retryAfterS: 1 } });
      sync.length = 0;
      queue.length = 0;
    },
  };
}
