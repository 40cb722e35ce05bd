import { randomBytes } from 'node:crypto';
import type { Kysely, Transaction } from 'kysely';
import { type Actor, recordAudit } from '../../audit/trail.js';
import type { AuditAction, EventType, Tables } from '../../db/types.js';
import { AppError, notFound } from '../../http/errors.js';
import { feedCursor } from '../../http/cursor.js';
import { newWebhookSecret } from '../signature.js';
import { redactUrl } from '../../observability/logger.js';
import {
  DEFAULT_EXPIRE_OLD_AFTER_S,
  type EndpointBody,
  type EndpointPatch,
  type EndpointView,
} from './schemas.js';
import {
  deleteEndpoint,
  type EndpointChange,
  type EndpointRow,
  type EndpointStats,
  insertEndpoint,
  lockEndpoint,
  readEndpoint,
  readEndpoints,
  readEndpointStats,
  replayToEndpoint,
  rotateEndpointSecret,
  updateEndpoint,
} from './sql.js';

export interface EndpointServiceDeps {
  db: Kysely<Tables>;
  clock: () => Date;
  /** This instance's configured endpoints' keys: the configured endpoints it lists. */
  configuredKeys: readonly string[];
  /** After a change: this instance reads the endpoints again (others do within a second). */
  changed: () => Promise<void>;
}

const managedByConfig = (what: string) =>
  new AppError(409, 'managed_by_config', `this endpoint comes from EVENT_WEBHOOK_URLS: ${what} there (or create it through the API instead)`);

function view(row: EndpointRow, stats: EndpointStats | undefined): EndpointView {
  return {
    id: row.id,
    url: row.shown_url,
    description: row.description,
    types: (row.types as EventType[] | null) ?? null,
    rateLimitPerS: row.rate_limit_per_s,
    maxInFlight: row.max_in_flight,
    status: row.status,
    disabledReason: row.disabled_reason,
    createdAt: new Date(row.created_at).toISOString(),
    managed: row.managed,
    stats: {
      delivered: stats?.delivered ?? 0,
      failed: stats?.failed ?? 0,
      dead: stats?.dead ?? 0,
      lastAttemptAt: stats?.last_attempt_at ? new Date(stats.last_attempt_at).toISOString() : null,
      lastStatus: stats?.last_status ?? null,
    },
  };
}

/** Endpoint management under the admin keys: every change audited in its own transaction. */
export function endpointService(deps: EndpointServiceDeps) {
  const { db } = deps;
  const visible = (row: EndpointRow) => row.managed === 'api' || deps.configuredKeys.includes(row.key);
  const audit = (tx: Kysely<Tables>, action: AuditAction, actor: Actor, id: string, counts: Record<string, number> = {}) =>
    recordAudit(tx, { at: deps.clock(), action, actor, subject: `endpoint:${id}`, counts });

  async function one(id: string): Promise<EndpointRow> {
    const row = await readEndpoint(db, id);
    if (!row || !visible(row)) throw notFound(`no endpoint ${id}`);
    return row;
  }

  /** one(), locked in the change's transaction: changes to one endpoint at once are made one after the other, and one made after a delete is a 404. */
  async function locked(tx: Transaction<Tables>, id: string, strength: 'change' | 'keep' = 'change'): Promise<EndpointRow> {
    const row = await lockEndpoint(tx, id, strength);
    if (!row || !visible(row)) throw notFound(`no endpoint ${id}`);
    return row;
  }

  async function withStats(row: EndpointRow): Promise<EndpointView> {
    return view(row, (await readEndpointStats(db, [row.key])).get(row.key));
  }

  return {
    async list(): Promise<EndpointView[]> {
      const rows = (await readEndpoints(db)).filter(visible);
      const stats = await readEndpointStats(db, rows.map((r) => r.key));
      return rows.map((r) => view(r, stats.get(r.key)));
    },

    async read(id: string): Promise<EndpointView> {
      return withStats(await one(id));
    },

    async create(body: EndpointBody, actor: Actor): Promise<EndpointView & { secret: string }> {
      const id = `ep_${randomBytes(16).toString('hex')}`;
      const secret = body.secret?.trim() ?? newWebhookSecret();
      const row = await db.transaction().execute(async (tx) => {
        const row = await insertEndpoint(
          tx,
          {
            id,
            key: id,
            managed: 'api',
            url: body.url,
            shownUrl: redactUrl(body.url),
            description: body.description ?? '',
            types: body.types ?? null,
            rateLimitPerS: body.rateLimitPerS ?? null,
            maxInFlight: body.maxInFlight ?? null,
            secret,
          },
          deps.clock(),
        );
        await audit(tx, 'endpoint.create', actor, id);
        return row;
      });
      await deps.changed();
      return { ...view(row, undefined), secret };
    },

    async update(id: string, patch: EndpointPatch, actor: Actor): Promise<EndpointView> {
      const change: EndpointChange = {};
      if (patch.url !== undefined) change.url = { url: patch.url, shownUrl: redactUrl(patch.url) };
      if (patch.description !== undefined) change.description = patch.description;
      if (patch.types !== undefined) change.types = patch.types;
      if (patch.rateLimitPerS !== undefined) change.rateLimitPerS = patch.rateLimitPerS;
      if (patch.maxInFlight !== undefined) change.maxInFlight = patch.maxInFlight;
      if (patch.status !== undefined) change.status = patch.status;
      const row = await db.transaction().execute(async (tx) => {
        const before = await locked(tx, id);
        if (before.managed === 'config' && patch.url !== undefined) throw managedByConfig('change its URL');
        const row = await updateEndpoint(tx, before, change, deps.clock());
        await audit(tx, 'endpoint.update', actor, id);
        return row;
      });
      await deps.changed();
      return withStats(row);
    },

    async remove(id: string, actor: Actor): Promise<number> {
      const ended = await db.transaction().execute(async (tx) => {
        const row = await locked(tx, id);
        if (row.managed === 'config') throw managedByConfig('remove it');
        const ended = await deleteEndpoint(tx, row, deps.clock());
        await audit(tx, 'endpoint.delete', actor, id, { deliveriesEnded: ended });
        return ended;
      });
      await deps.changed();
      return ended;
    },

    async rotate(id: string, expireOldAfterS: number | undefined, actor: Actor): Promise<string> {
      const secret = newWebhookSecret();
      const now = deps.clock();
      await db.transaction().execute(async (tx) => {
        const row = await locked(tx, id);
        if (row.managed === 'config') throw managedByConfig('rotate EVENT_WEBHOOK_SECRET');
        await rotateEndpointSecret(tx, row, secret, new Date(now.getTime() + (expireOldAfterS ?? DEFAULT_EXPIRE_OLD_AFTER_S) * 1000), now);
        await audit(tx, 'endpoint.rotate_secret', actor, id);
      });
      await deps.changed();
      return secret;
    },

    async replay(id: string, from: { since: string } | { after: string }, actor: Actor): Promise<number> {
      const position = 'after' in from ? { after: feedCursor.decode(from.after) } : { since: from.since };
      const queued = await db.transaction().execute(async (tx) => {
        const row = await locked(tx, id, 'keep');
        const queued = await replayToEndpoint(tx, row, position, deps.clock());
        await audit(tx, 'endpoint.replay', actor, id, { queued });
        return queued;
      });
      await deps.changed();
      return queued;
    },
  };
}
export type EndpointService = ReturnType<typeof endpointService>;
