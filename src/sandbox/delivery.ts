import http from 'node:http';
import https from 'node:https';
import type { FastifyBaseLogger } from 'fastify';
import { redactUrl } from '../observability/logger.js';
import type { UnderwritingResult } from '../provider/schemas.js';
import { memoryPendingStore, type PendingDelivery, type PendingResult, type PendingStore } from './pending.js';

/** How hard the simulator tries to deliver one callback ("retries: not shown" by the provider). */
export interface RetryPolicy {
  /** Wait before the first retry; each further wait doubles. */
  firstRetryMs: number;
  /** No single wait is longer than this. */
  maxRetryMs: number;
  /** No retry is scheduled once this long has passed since the first attempt. */
  giveUpAfterMs: number;
  /** One delivery attempt may take this long. */
  attemptTimeoutMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = {
  firstRetryMs: 1000,
  maxRetryMs: 60_000,
  giveUpAfterMs: 5 * 60_000,
  attemptTimeoutMs: 10_000,
};

export interface CallbackDelivery {
  /**
   * Posts the result (finished stamped at delivery) to the callback URL (read when the delay ends)
   * after delayMs, retrying. Resolves once the delivery is stored: it survives a restart.
   */
  deliverLater(result: PendingResult, delayMs: number): Promise<void>;
  /** Schedules the deliveries a previous run left pending (those overdue at once). */
  resume(): Promise<void>;
  /** Cancels every scheduled delivery and aborts the ones in flight; stored ones stay stored. */
  close(): void;
}

/** Delivers results in the background; timers are unref'd so they never hold a process open. */
export function callbackDelivery(
  callbackUrl: () => string | undefined,
  log: FastifyBaseLogger,
  policy: RetryPolicy = DEFAULT_RETRY_POLICY,
  store: PendingStore = memoryPendingStore(),
  clock: () => Date = () => new Date(),
): CallbackDelivery {
  const timers = new Set<NodeJS.Timeout>();
  const stopping = new AbortController();
  const httpAgent = new http.Agent({ keepAlive: true });
  const httpsAgent = new https.Agent({ keepAlive: true });
  const forget = (id: string) =>
    void store.remove(id).catch((err: unknown) => log.error({ err }, 'sandbox: could not update its pending deliveries'));

  const later = (fn: () => void, ms: number) => {
    if (stopping.signal.aborted) return;
    const timer = setTimeout(() => {
      timers.delete(timer);
      fn();
    }, ms);
    timer.unref();
    timers.add(timer);
  };

  /**
   * One POST of the result; resolves undefined on a 2xx, else why not. node:http with a keep-alive
   * agent rather than fetch: fetch (undici, its web streams and abort signals) was a third of the
   * sandbox's CPU at 200 calls/s, which in the campaign bench is CPU the gateway waits for.
   */
  function attempt(url: string, body: UnderwritingResult): Promise<string | undefined> {
    return new Promise((resolve) => {
      let target: URL;
      try {
        target = new URL(url);
      } catch (err) {
        resolve((err as Error).message);
        return;
      }
      const client = target.protocol === 'https:' ? https : target.protocol === 'http:' ? http : undefined;
      if (!client) {
        resolve(`unsupported protocol ${target.protocol}`);
        return;
      }
      const payload = Buffer.from(JSON.stringify(body));
      let settled = false;
      const finish = (failure: string | undefined) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(failure);
      };
      const request = client.request(
        target,
        {
          method: 'POST',
          agent: target.protocol === 'https:' ? httpsAgent : httpAgent,
          headers: { 'content-type': 'application/json', 'content-length': payload.length },
          signal: stopping.signal,
        },
        (res) => {
          const status = res.statusCode ?? 0;
          // Read (and drop) the answer, so that the connection is kept for the next one; 3xx is not followed.
          res.on('error', (err) => finish(err.message));
          res.on('end', () => finish(status >= 200 && status < 300 ? undefined : `status ${status}`));
          res.resume();
        },
      );
      const timer = setTimeout(() => request.destroy(new Error(`no answer within ${policy.attemptTimeoutMs} ms`)), policy.attemptTimeoutMs);
      timer.unref();
      request.on('error', (err) => finish(err.message));
      request.end(payload);
    });
  }

  function send(id: string, url: string, body: UnderwritingResult, attemptNo: number, firstAt: number, wait: number): void {
    void attempt(url, body).then((failure) => {
      const where = redactUrl(url);
      const customerUuid = body.customerUuid;
      if (failure === undefined) {
        log.info({ customerUuid, attempt: attemptNo, callbackUrl: where }, 'sandbox: callback delivered');
        forget(id);
        return;
      }
      if (stopping.signal.aborted) return;
      if (Date.now() - firstAt + wait > policy.giveUpAfterMs) {
        log.error({ customerUuid, attempts: attemptNo, failure, callbackUrl: where }, 'sandbox: callback abandoned after retries');
        forget(id);
        return;
      }
      log.warn({ customerUuid, attempt: attemptNo, failure, retryInMs: wait }, 'sandbox: callback delivery failed; will retry');
      later(() => send(id, url, body, attemptNo + 1, firstAt, Math.min(wait * 2, policy.maxRetryMs)), wait);
    });
  }

  function schedule({ id, dueAt, result }: PendingDelivery): void {
    later(() => {
      const body: UnderwritingResult = { ...result, finished: clock().toISOString() };
      const url = callbackUrl();
      if (url === undefined) {
        log.warn({ customerUuid: body.customerUuid }, 'sandbox: no callback URL configured; result not delivered');
        forget(id);
        return;
      }
      // Retries give up counting from when the result was due, across restarts too.
      send(id, url, body, 1, Math.min(dueAt, Date.now()), Math.min(policy.firstRetryMs, policy.maxRetryMs));
    }, Math.max(0, dueAt - Date.now()));
  }

  return {
    async deliverLater(result, delayMs) {
      schedule(await store.add({ dueAt: Date.now() + delayMs, result }));
    },
    async resume() {
      const pending = await store.list();
      if (pending.length > 0) log.info({ pending: pending.length }, 'sandbox: resuming the deliveries left pending by the previous run');
      for (const delivery of pending) schedule(delivery);
    },
    close() {
      stopping.abort();
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      httpAgent.destroy();
      httpsAgent.destroy();
    },
  };
}
