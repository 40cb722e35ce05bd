import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { Tables } from '../db/types.js';
import { disableFailingEndpoint, recordEndpointFailing } from './endpoint-limits-sql.js';
import type { EndpointTarget } from './endpoints/registry.js';

// An endpoint's health as one instance's delivery worker sees it: since when every attempt has
// failed (failing_since, in its row), and its disabling once that has lasted disableAfterS.

export interface EndpointHealthDeps {
  db: Kysely<Tables>;
  disableAfterS: number;
  log: Pick<FastifyBaseLogger, 'warn'>;
  stopped(): boolean;
  warn(err: unknown, message: string): void;
}

/** Told of each finished attempt (ok: a 2xx) to an endpoint, at the time it ended. */
export type EndpointHealth = (target: EndpointTarget, ok: boolean, at: Date, error: string | null) => void;

export function endpointHealth(deps: EndpointHealthDeps): EndpointHealth {
  /** Keys whose health write is under way: one at a time per endpoint. */
  const healthWriting = new Set<string>();

  /**
   * Tracks each endpoint's continuous failure (failing_since) and disables it once that lasts
   * disableAfterS. Written only when the state changes: in steady state an attempt costs nothing here.
   */
  return function health(target: EndpointTarget, ok: boolean, at: Date, error: string | null): void {
    if (deps.stopped() && !ok) return;
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
      .catch((err) => deps.warn(err, 'could not record an event endpoint health'))
      .finally(() => healthWriting.delete(target.key));
  };
}
