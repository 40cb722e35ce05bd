import { randomBytes } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import { Agent, request } from 'undici';
import { isStorageUnavailable } from '../db/database.js';
import type { Tables } from '../db/types.js';
import { retryDelayS } from './backoff.js';
import type { WebhookSigner } from './signature.js';
import { type ClaimedDelivery, claimDeliveries, type FinishedAttempt, recordFinishedAttempts } from './sql.js';
import { scrubTarget, type WebhookTarget } from './targets.js';

export interface DeliveryWorkerDeps {
  db: Kysely<Tables>;
  targets: readonly WebhookTarget[];
  signer: WebhookSigner;
  clock: () => Date;
  timeoutMs: number;
  horizonS: number;
  log: Pick<FastifyBaseLogger, 'info' | 'warn' | 'error' | 'debug'>;
  /** Told each attempt's result, and for a delivery the seconds from the event to its 2xx. */
  onResult?: (result: 'delivered' | 'failed' | 'dead', lagS?: number) => void;
  /** Attempts in flight at most (one instance). */
  concurrency?: number;
  /** Looks for due work at least this often, notifications or not (retries, other instances' leases). */
  pollMs?: number;
}

export interface DeliveryWorker {
  /** Something may be due now (a notification, a redelivery): look at once. */
  wake(): void;
  /** Stops claiming, waits for attempts in flight and writes them. */
  stop(): Promise<void>;
}

/** Bytes of a receiver's answer read at most; the rest is dropped with the connection. */
const ANSWER_MAX_BYTES = 16 * 1024;
const ERROR_MAX_CHARS = 300;
/** How long a wake waits for more changes before it claims. */
const CLAIM_GATHER_MS = 5;

/**
 * Pushes pending deliveries: claims a batch under a lease (SKIP LOCKED, so instances share the
 * work and each sends a delivery once in normal operation), POSTs each signed event, and writes
 * finished attempts in batches. A crashed instance's leases run out and others take them over.
 */
export function startDeliveryWorker(deps: DeliveryWorkerDeps): DeliveryWorker {
  const concurrency = deps.concurrency ?? 64;
  const pollMs = deps.pollMs ?? 1000;
  // Long enough for one attempt and its write; short enough that a dead
  // instance's deliveries move on within seconds.
  const leaseS = deps.timeoutMs / 1000 + 5;
  const byKey = new Map(deps.targets.map((t) => [t.key, t]));
  const keys = [...byKey.keys()];
  // No redirects: undici's dispatcher follows none unless told to.
  const agent = new Agent({ connections: concurrency, keepAliveTimeout: 10_000, connect: { timeout: deps.timeoutMs } });

  let stopped = false;
  // Attempts in flight are cut short at shutdown: their deliveries are released for the next claim.
  const stopping = new AbortController();
  let inFlight = 0;
  let claiming: Promise<void> | undefined;
  let again = false;
  let backoffUntil = 0;
  const sends = new Set<Promise<void>>();
  const finished: FinishedAttempt[] = [];
  let flushing: Promise<void> | undefined;
  const token = () => randomBytes(12).toString('base64url');

  let soon: NodeJS.Timeout | undefined;

  /** Claims a few milliseconds after the first wake: the changes committed meanwhile share one claim. */
  function wake(): void {
    if (stopped || soon) return;
    soon = setTimeout(claimNow, CLAIM_GATHER_MS);
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
    if (Date.now() < backoffUntil) return;
    while (!stopped && inFlight < concurrency) {
      const limit = concurrency - inFlight;
      let claimed: ClaimedDelivery[];
      const lease = token();
      try {
        claimed = await claimDeliveries(deps.db, { now: deps.clock(), keys, limit, leaseS, token: lease });
      } catch (err) {
        backoffUntil = Date.now() + pollMs;
        warnStorage(err, 'could not claim event deliveries; retrying');
        return;
      }
      for (const delivery of claimed) {
        inFlight++;
        const send = attempt(delivery, lease).finally(() => {
          inFlight--;
          sends.delete(send);
        });
        sends.add(send);
      }
      if (claimed.length < limit) return;
    }
  }

  async function attempt(delivery: ClaimedDelivery, lease: string): Promise<void> {
    const target = byKey.get(delivery.url_key)!;
    const body = JSON.stringify({
      id: delivery.public_id,
      type: delivery.type,
      timestamp: new Date(delivery.created_at).toISOString(),
      data: delivery.data,
    });
    const at = deps.clock();
    let httpStatus: number | null = null;
    let error: string | null = null;
    try {
      const headers: Record<string, string> = {
        'content-type': 'application/json',
        'user-agent': 'underwriting-gateway-events',
        ...deps.signer.headers(delivery.public_id, Math.floor(at.getTime() / 1000), body),
      };
      if (target.authorization) headers.authorization = target.authorization;
      const res = await request(target.url, {
        method: 'POST',
        headers,
        body,
        dispatcher: agent,
        signal: AbortSignal.any([AbortSignal.timeout(deps.timeoutMs), stopping.signal]),
        headersTimeout: deps.timeoutMs,
        bodyTimeout: deps.timeoutMs,
      });
      httpStatus = res.statusCode;
      await res.body.dump({ limit: ANSWER_MAX_BYTES }).catch(() => {});
      if (httpStatus < 200 || httpStatus >= 300) error = `the receiver answered HTTP ${httpStatus}`;
    } catch (err) {
      error = describe(err, target, deps.timeoutMs);
    }
    const done = deps.clock();
    let finishedAttempt: FinishedAttempt;
    if (stopping.signal.aborted && error !== null) {
      finishedAttempt = { id: delivery.id, token: lease, status: 'pending', at: done, httpStatus, error: 'interrupted: the instance was stopping', nextAt: done };
    } else if (error === null) {
      finishedAttempt = { id: delivery.id, token: lease, status: 'delivered', at: done, httpStatus, error: null, nextAt: null };
      deps.onResult?.('delivered', (done.getTime() - new Date(delivery.created_at).getTime()) / 1000);
    } else {
      const deadline = new Date(delivery.queued_at).getTime() + deps.horizonS * 1000;
      const attempts = delivery.attempts + 1;
      if (done.getTime() >= deadline) {
        finishedAttempt = { id: delivery.id, token: lease, status: 'dead', at: done, httpStatus, error, nextAt: null };
        deps.onResult?.('dead');
        deps.log.warn({ event: delivery.public_id, url: target.shown, attempts, status: httpStatus, error }, 'event delivery dead: no 2xx within the retry horizon');
      } else {
        const nextAt = new Date(Math.min(deadline, done.getTime() + retryDelayS(attempts) * 1000));
        finishedAttempt = { id: delivery.id, token: lease, status: 'pending', at: done, httpStatus, error, nextAt };
        deps.onResult?.('failed');
        deps.log.info({ event: delivery.public_id, url: target.shown, attempts, status: httpStatus, error, nextAt }, 'event delivery failed; will retry');
      }
    }
    finished.push(finishedAttempt);
    flush();
  }

  /** One write of finished attempts in flight at a time; whatever finishes meanwhile rides on the next. */
  function flush(): void {
    flushing ??= (async () => {
      while (finished.length > 0) {
        const batch = finished.splice(0, 500);
        try {
          await recordFinishedAttempts(deps.db, batch);
        } catch (err) {
          // Kept and written once the database is back; meanwhile the leases may run out and the
          // deliveries be sent again (at least once).
          finished.unshift(...batch);
          warnStorage(err, 'could not record event delivery outcomes; retrying');
          if (stopped) break;
          await new Promise((resolve) => setTimeout(resolve, pollMs));
        }
      }
      flushing = undefined;
      // A delivered or dead delivery may free the customer's next one.
      wake();
    })();
  }

  function warnStorage(err: unknown, message: string): void {
    const detail = { err: { message: (err as Error).message } };
    if (isStorageUnavailable(err)) deps.log.warn(detail, message);
    else deps.log.error(detail, message);
  }

  const timer = setInterval(wake, pollMs);
  timer.unref();
  claimNow();

  return {
    wake,
    async stop() {
      stopped = true;
      clearInterval(timer);
      clearTimeout(soon);
      stopping.abort();
      await claiming;
      await Promise.all([...sends]);
      await flushing;
      await agent.close();
    },
  };
}

/** Why an attempt failed, in a line that names no secret of the URL. */
function describe(err: unknown, target: WebhookTarget, timeoutMs: number): string {
  const e = err as { name?: string; code?: string; message?: string };
  let text: string;
  if (e?.name === 'TimeoutError' || e?.code === 'UND_ERR_HEADERS_TIMEOUT' || e?.code === 'UND_ERR_BODY_TIMEOUT') text = `timed out after ${timeoutMs} ms`;
  else text = [e?.code, e?.message].filter(Boolean).join(': ') || 'the request failed';
  return scrubTarget(text, target).slice(0, ERROR_MAX_CHARS);
}
