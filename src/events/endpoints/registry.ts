import { createHash, randomBytes } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { EndpointStatus, EventType, Tables } from '../../db/types.js';
import { type SigningSecret, type WebhookSigner, webhookSigner } from '../signature.js';
import { type WebhookTarget, webhookTarget } from '../targets.js';
import { LEGACY_KEY, type UrlKeyer } from '../url-key.js';
import { rekeyEndpoints } from './rekey.js';
import { clearExpiredSecrets, type EndpointRow, readEndpoints, syncConfiguredEndpoints } from './sql.js';

/** An endpoint as the delivery worker sends to it. */
export interface EndpointTarget extends WebhookTarget {
  id: string;
  managed: 'api' | 'config';
  status: EndpointStatus;
  /** Types it receives; null: all. */
  types: EventType[] | null;
  rateLimitPerS: number | null;
  /** Attempts in flight to it at most, across every instance; null: no cap of its own. */
  maxInFlight: number | null;
  failingSince: Date | null;
  signer: WebhookSigner;
}

export interface EndpointRegistry {
  /** The endpoints this instance can send to, as last read. */
  targets(): readonly EndpointTarget[];
  /** This instance's configured endpoints' keys (EVENT_WEBHOOK_URLS). */
  readonly configuredKeys: readonly string[];
  /** Reads the endpoints again now (after a change this instance made). */
  refresh(): Promise<void>;
  /** Called after each read that changed something. */
  onChange(fn: () => void): void;
  stop(): void;
}

/** Every instance reads the endpoints this often, so that a change made on any is seen within a second. */
export const REFRESH_MS = 500;

export interface RegistryDeps {
  db: Kysely<Tables>;
  /** EVENT_WEBHOOK_URLS and EVENT_WEBHOOK_SECRET, when set. */
  configured: { urls: readonly string[]; secret: string } | undefined;
  /** Names the configured URLs (keyed under CPF_HASH_KEY). */
  urlKeys: UrlKeyer;
  log: Pick<FastifyBaseLogger, 'warn' | 'info'>;
  refreshMs?: number;
  clock?: () => Date;
}

/** A digest of what the worker sends with (a digest: the secrets are not copied into one more string). */
function rowsFingerprint(rows: readonly EndpointRow[]): string {
  const used = rows.map((r) => [
    r.id,
    r.key,
    r.managed,
    r.url,
    r.types,
    r.rate_limit_per_s,
    r.max_in_flight,
    r.status,
    r.failing_since,
    r.secret,
    r.previous_secret,
    r.previous_expires_at,
  ]);
  return createHash('sha256').update(JSON.stringify(used)).digest('hex');
}

/**
 * The endpoints, read from the database every REFRESH_MS. An API-managed endpoint is sent to by
 * every instance; a configured one only by the instances configured with it (its URL and secret
 * are in their environment, never in the database).
 */
export function endpointRegistry(deps: RegistryDeps): EndpointRegistry {
  const configured = new Map((deps.configured?.urls ?? []).map((url) => {
    const t = webhookTarget(url, deps.urlKeys.key);
    return [t.key, t] as const;
  }));
  const configSigner = deps.configured ? webhookSigner(deps.configured.secret) : undefined;
  let current: EndpointTarget[] = [];
  let seen = '';
  let warned = false;
  const listeners: Array<() => void> = [];

  function toTarget(row: EndpointRow): EndpointTarget | undefined {
    const common = {
      id: row.id,
      managed: row.managed,
      status: row.status,
      types: (row.types as EventType[] | null) ?? null,
      rateLimitPerS: row.rate_limit_per_s,
      maxInFlight: row.max_in_flight,
      failingSince: row.failing_since ? new Date(row.failing_since) : null,
    };
    if (row.managed === 'config') {
      const t = configured.get(row.key);
      return t && configSigner ? { ...t, ...common, signer: configSigner } : undefined;
    }
    if (!row.secret) return undefined;
    const secrets: SigningSecret[] = [{ secret: row.secret }];
    if (row.previous_secret && row.previous_expires_at) secrets.push({ secret: row.previous_secret, until: new Date(row.previous_expires_at) });
    return { ...webhookTarget(row.url, () => row.key), ...common, signer: webhookSigner(secrets) };
  }

  // Rows still named by an older key are re-keyed before this instance writes its configured ones:
  // at the first read, and whenever a configured row in the legacy form appears (written by an
  // instance still on older code).
  let rekeyed = false;
  const rekey = async () => {
    const renamed = await rekeyEndpoints(deps.db, deps.urlKeys, deps.configured?.urls ?? []);
    rekeyed = true;
    if (renamed > 0) deps.log.info({ renamed }, 'event endpoint keys re-keyed under CPF_HASH_KEY');
  };

  async function refresh(): Promise<void> {
    try {
      if (!rekeyed) await rekey();
      let rows = await readEndpoints(deps.db);
      if (rows.some((r) => r.managed === 'config' && LEGACY_KEY.test(r.key))) {
        await rekey();
        rows = await readEndpoints(deps.db);
      }
      // A configured URL's row is written at start; when the database was not there then, now.
      const missing = [...configured.values()].filter((t) => !rows.some((r) => r.key === t.key));
      if (missing.length > 0) {
        await syncConfiguredEndpoints(deps.db, missing, new Date());
        rows = await readEndpoints(deps.db);
      }
      // A rotated-out secret whose overlap has ended is forgotten (by whichever instance sees it first).
      const now = (deps.clock ?? (() => new Date()))();
      if (rows.some((r) => r.previous_expires_at !== null && new Date(r.previous_expires_at).getTime() <= now.getTime())) {
        await clearExpiredSecrets(deps.db, now);
      }
      // Compared by what the worker uses, so that an unchanged table costs no rebuild: every column
      // toTarget reads, not updated_at alone (two changes in one millisecond write the same one).
      const fingerprint = rowsFingerprint(rows);
      warned = false;
      if (fingerprint === seen) return;
      seen = fingerprint;
      current = rows.map(toTarget).filter((t): t is EndpointTarget => t !== undefined);
      for (const fn of listeners) fn();
    } catch (err) {
      if (!warned) deps.log.warn({ err: { message: (err as Error).message } }, 'could not read the event endpoints; keeping the last read');
      warned = true;
    }
  }

  let refreshing: Promise<void> | undefined;
  const timer = setInterval(() => {
    refreshing ??= refresh().finally(() => (refreshing = undefined));
  }, deps.refreshMs ?? REFRESH_MS);
  timer.unref();

  return {
    targets: () => current,
    configuredKeys: [...configured.keys()],
    refresh: async () => {
      await refreshing;
      await refresh();
    },
    onChange: (fn) => listeners.push(fn),
    stop: () => clearInterval(timer),
  };
}

/** Endpoints that never change, all active and signed with one secret (a worker on its own, as tests start one). */
export function fixedEndpoints(targets: readonly WebhookTarget[], secret: string): { targets(): readonly EndpointTarget[] } {
  const signer = webhookSigner(secret);
  const fixed = targets.map((t) => ({
    ...t,
    id: `ep_${randomBytes(16).toString('hex')}`,
    managed: 'config' as const,
    status: 'active' as const,
    types: null,
    rateLimitPerS: null,
    maxInFlight: null,
    failingSince: null,
    signer,
  }));
  return { targets: () => fixed };
}
