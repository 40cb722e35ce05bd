import { randomBytes } from 'node:crypto';
import { type Kysely, type Selectable, sql, type Transaction } from 'kysely';
import type { SqlSnapshot } from '../../db/statements.js';
import type { EndpointStatus, EventEndpointsTable, EventType, Tables } from '../../db/types.js';
import { feedHorizon } from '../feed-sql.js';
import type { FeedPosition } from '../feed-sql.js';

// The SQL of endpoints as data: their rows, their delivery figures, and what a change does to
// their deliveries and dispatch position. An endpoint's key names its deliveries (url_key).

export type EndpointRow = Selectable<EventEndpointsTable>;

export interface EndpointStats {
  url_key: string;
  delivered: number;
  failed: number;
  dead: number;
  last_attempt_at: Date | null;
  last_status: number | null;
}

/** Every endpoint, oldest first (every instance reads them all, often: a small table). */
export async function readEndpoints(db: Kysely<Tables>): Promise<EndpointRow[]> {
  return db.selectFrom('event_endpoints').selectAll().orderBy('created_at').orderBy('id').execute();
}

/** The keys of the endpoints an instance configured with `configured` pushes to: every API-managed one, and its own. */
export async function endpointKeys(db: Kysely<Tables>, configured: readonly string[]): Promise<string[]> {
  const rows = await db
    .selectFrom('event_endpoints')
    .select('key')
    .where((eb) => eb.or([eb('managed', '=', 'api'), ...(configured.length > 0 ? [eb('key', 'in', configured)] : [])]))
    .execute();
  const keys = rows.map((r) => r.key);
  // A configured URL counts even before its row is written.
  return [...new Set([...configured, ...keys])];
}

export async function readEndpoint(db: Kysely<Tables>, id: string): Promise<EndpointRow | undefined> {
  return db.selectFrom('event_endpoints').selectAll().where('id', '=', id).executeTakeFirst();
}

/**
 * The endpoint, locked for this transaction: `change` for a change, a delete or a rotation (one made
 * at the same time waits, then finds the row as this one left it, or gone); `keep` for a replay,
 * which only needs it not deleted meanwhile and must not stall its deliveries (the worker's slot
 * reservations lock it `for no key update`, which a key share lock lets through).
 */
export async function lockEndpoint(tx: Transaction<Tables>, id: string, strength: 'change' | 'keep'): Promise<EndpointRow | undefined> {
  const query = tx.selectFrom('event_endpoints').selectAll().where('id', '=', id);
  return (strength === 'change' ? query.forUpdate() : query.forKeyShare()).executeTakeFirst();
}

/**
 * Per key: deliveries delivered, failed (pending after a failed attempt), dead, and the latest
 * attempt. Each figure is read through event_deliveries_endpoint (url_key, status,
 * last_attempt_at): the counts over the endpoint's own entries of that status, the latest attempt
 * as the newest of three (one per status) backward index lookups. No other endpoint's deliveries
 * are read.
 */
export function endpointStatsQuery(keys: readonly string[]) {
  return sql<EndpointStats>`
    select k.key as url_key,
           (select count(*) from event_deliveries d where d.url_key = k.key and d.status = 'delivered')::int as delivered,
           (select count(*) from event_deliveries d where d.url_key = k.key and d.status = 'pending' and d.attempts > 0)::int as failed,
           (select count(*) from event_deliveries d where d.url_key = k.key and d.status = 'dead')::int as dead,
           l.last_attempt_at, l.last_status
    from unnest(${keys}::text[]) as k(key)
    left join lateral (
      select x.last_attempt_at, x.last_status
      from unnest(array['pending', 'delivered', 'dead']::text[]) as s(status)
      cross join lateral (
        select d.last_attempt_at, d.last_status from event_deliveries d
        where d.url_key = k.key and d.status = s.status and d.last_attempt_at is not null
        order by d.last_attempt_at desc
        limit 1
      ) x
      order by x.last_attempt_at desc
      limit 1
    ) l on true`;
}

export async function readEndpointStats(db: Kysely<Tables>, keys: readonly string[]): Promise<Map<string, EndpointStats>> {
  if (keys.length === 0) return new Map();
  const { rows } = await endpointStatsQuery(keys).execute(db);
  return new Map(rows.map((r) => [r.url_key, r]));
}

export interface NewEndpoint {
  id: string;
  key: string;
  managed: 'api' | 'config';
  url: string;
  shownUrl: string;
  description: string;
  types: EventType[] | null;
  rateLimitPerS: number | null;
  maxInFlight: number | null;
  secret: string | null;
}

/**
 * Stores an endpoint and starts its dispatch at the feed's horizon: it receives what is recorded
 * from now on (replay gives it the past). In the caller's transaction.
 */
export async function insertEndpoint(tx: Transaction<Tables>, e: NewEndpoint, now: Date): Promise<EndpointRow> {
  const row = await tx
    .insertInto('event_endpoints')
    .values({
      id: e.id,
      key: e.key,
      managed: e.managed,
      url: e.url,
      shown_url: e.shownUrl,
      description: e.description,
      types: e.types,
      rate_limit_per_s: e.rateLimitPerS,
      max_in_flight: e.maxInFlight,
      status: 'active',
      secret: e.secret,
      created_at: now,
      updated_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  await startEndpointDispatch(tx, e.key, e.shownUrl, now);
  return row;
}

async function startEndpointDispatch(db: Kysely<Tables>, key: string, shown: string, now: Date): Promise<void> {
  const horizon = await feedHorizon(db);
  await sql`
    insert into event_dispatch (url_key, url, tx_id, event_id, updated_at)
    values (${key}, ${shown}, ${horizon}::xid8, 0, ${now})
    on conflict (url_key) do nothing`.execute(db);
}

/**
 * The configured URLs' endpoints: a row each (kept as it is when it exists: its status, types and
 * rate set through the API stay). Their dispatch positions are started by the worker, as before.
 * Its id is random, drawn when its row is first written and kept in the row (every instance and
 * every restart finds it by the key): derived from the URL, it would let a weak secret in the URL
 * be guessed offline from the id.
 */
export async function syncConfiguredEndpoints(db: Kysely<Tables>, targets: readonly { key: string; shown: string }[], now: Date): Promise<void> {
  if (targets.length === 0) return;
  await db
    .insertInto('event_endpoints')
    .values(
      targets.map((t) => ({
        id: `ep_${randomBytes(16).toString('hex')}`,
        key: t.key,
        managed: 'config' as const,
        url: t.shown,
        shown_url: t.shown,
        description: '',
        status: 'active' as const,
        created_at: now,
        updated_at: now,
      })),
    )
    // A row written by an earlier version shows the URL as that version redacted it: shown anew.
    .onConflict((oc) =>
      oc
        .column('key')
        .doUpdateSet((eb) => ({ url: eb.ref('excluded.url'), shown_url: eb.ref('excluded.shown_url') }))
        .where('event_endpoints.shown_url', 'is distinct from', (eb) => eb.ref('excluded.shown_url')),
    )
    .execute();
}

/**
 * Shows every endpoint's URL as `redact` does now (an earlier version showed bare query words, path
 * parameters and a webhook path's token): its row, its dispatch position and the deliveries written
 * with the URL as shown then (a token stored with each), rewritten once, by the endpoint's index. A
 * configured endpoint's row holds only the URL as shown, redacted again (the same when it already
 * was). The ids changed.
 */
export async function redactStoredUrls(db: Kysely<Tables>, redact: (url: string) => string): Promise<string[]> {
  const rows = await db
    .selectFrom('event_endpoints as e')
    .leftJoin('event_dispatch as d', 'd.url_key', 'e.key')
    .select(['e.id', 'e.key', 'e.url', 'e.shown_url', 'e.managed', 'd.url as dispatch_url'])
    .execute();
  const changed: string[] = [];
  for (const row of rows) {
    const shown = redact(row.url);
    // The dispatch position holds the URL as the deliveries were written with it.
    if (shown === row.shown_url && (row.dispatch_url === null || row.dispatch_url === shown)) continue;
    await db.transaction().execute(async (tx) => {
      await tx
        .updateTable('event_endpoints')
        .set(row.managed === 'api' ? { shown_url: shown } : { url: shown, shown_url: shown })
        .where('id', '=', row.id)
        .execute();
      await tx.updateTable('event_dispatch').set({ url: shown }).where('url_key', '=', row.key).execute();
      await tx.updateTable('event_deliveries').set({ url: shown }).where('url_key', '=', row.key).where('url', '<>', shown).execute();
    });
    changed.push(row.id);
  }
  return changed;
}

export interface EndpointChange {
  url?: { url: string; shownUrl: string };
  description?: string;
  types?: EventType[] | null;
  rateLimitPerS?: number | null;
  maxInFlight?: number | null;
  status?: 'active' | 'paused';
}

/**
 * Applies a change. Made active again (from paused or disabled), its waiting deliveries are due
 * at once with a fresh retry horizon: they waited, they did not fail.
 */
export async function updateEndpoint(tx: Transaction<Tables>, before: EndpointRow, change: EndpointChange, now: Date): Promise<EndpointRow> {
  const resumed = change.status === 'active' && before.status !== 'active';
  const row = await tx
    .updateTable('event_endpoints')
    .set({
      updated_at: now,
      ...(change.url !== undefined ? { url: change.url.url, shown_url: change.url.shownUrl } : {}),
      ...(change.description !== undefined ? { description: change.description } : {}),
      ...(change.types !== undefined ? { types: change.types } : {}),
      ...(change.rateLimitPerS !== undefined ? { rate_limit_per_s: change.rateLimitPerS } : {}),
      ...(change.maxInFlight !== undefined ? { max_in_flight: change.maxInFlight } : {}),
      ...(change.status !== undefined ? { status: change.status } : {}),
      ...(resumed ? { disabled_reason: null, failing_since: null } : {}),
    })
    .where('id', '=', before.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  if (change.url !== undefined) {
    await tx.updateTable('event_dispatch').set({ url: change.url.shownUrl }).where('url_key', '=', before.key).execute();
    // Its pending deliveries are sent to the new URL now: shown with it (delivered and dead ones went to the old one).
    await tx
      .updateTable('event_deliveries')
      .set({ url: change.url.shownUrl })
      .where('url_key', '=', before.key)
      .where('status', '=', 'pending')
      .where('url', '<>', change.url.shownUrl)
      .execute();
  }
  if (resumed) {
    await tx
      .updateTable('event_deliveries')
      .set({ queued_at: now, next_attempt_at: now })
      .where('url_key', '=', before.key)
      .where('status', '=', 'pending')
      .execute();
  }
  return row;
}

/**
 * Deletes the endpoint and its dispatch position; its pending deliveries end dead (endpoint_deleted).
 * One whose attempt is in flight (leased) keeps its lease: the attempt's outcome still lands, a 2xx
 * as delivered (the receiver has it), a failure leaving it dead (record_event_delivery_outcomes).
 */
export async function deleteEndpoint(tx: Transaction<Tables>, row: EndpointRow, now: Date): Promise<number> {
  await tx.deleteFrom('event_endpoints').where('id', '=', row.id).execute();
  await tx.deleteFrom('event_dispatch').where('url_key', '=', row.key).execute();
  const inFlight = sql<boolean>`lease_until > ${now}`;
  const ended = await tx
    .updateTable('event_deliveries')
    .set({
      status: 'dead',
      last_error: 'endpoint_deleted',
      lease_until: sql`case when ${inFlight} then lease_until end`,
      lease_token: sql`case when ${inFlight} then lease_token end`,
      next_attempt_at: now,
    })
    .where('url_key', '=', row.key)
    .where('status', '=', 'pending')
    .executeTakeFirst();
  return Number(ended.numUpdatedRows);
}

/** A new secret; the one it replaces keeps signing until `previousUntil` (not kept at all when that is now). */
export async function rotateEndpointSecret(tx: Transaction<Tables>, row: EndpointRow, secret: string, previousUntil: Date, now: Date): Promise<void> {
  const keep = previousUntil.getTime() > now.getTime();
  await tx
    .updateTable('event_endpoints')
    .set({ secret, previous_secret: keep ? row.secret : null, previous_expires_at: keep ? previousUntil : null, updated_at: now })
    .where('id', '=', row.id)
    .execute();
}

/** Forgets every previous secret whose overlap has ended: an expired secret is not kept in the database. */
export async function clearExpiredSecrets(db: Kysely<Tables>, now: Date): Promise<void> {
  await db
    .updateTable('event_endpoints')
    .set({ previous_secret: null, previous_expires_at: null })
    .where('previous_expires_at', '<=', now)
    .execute();
}

/**
 * Queues for this endpoint every event from a point (created at or after `since`, or after a feed
 * position), of the types it receives, delivered before or not: each due now, with a fresh horizon.
 * The order rule (a customer's earlier pending delivery first) keeps each customer's events in order.
 */
export async function replayToEndpoint(
  tx: Kysely<Tables>,
  row: Pick<EndpointRow, 'key' | 'shown_url' | 'types'>,
  from: { since: string } | { after: FeedPosition },
  now: Date,
): Promise<number> {
  const where = 'since' in from ? sql`e.created_at >= ${from.since}::timestamptz` : sql`(e.tx_id, e.id) > (${from.after.tx}::xid8, ${from.after.id}::bigint)`;
  const { rows } = await sql<{ n: number }>`
    with queued as (
      insert into event_deliveries (event_id, customer_uuid, url_key, url, queued_at, next_attempt_at)
      select e.id, e.customer_uuid, ${row.key}, ${row.shown_url}, ${now}, ${now}
      from events e
      where ${where} and (${row.types}::text[] is null or e.type = any(${row.types}::text[]))
      order by e.tx_id, e.id
      on conflict (event_id, url_key) do update set url = excluded.url, status = 'pending', attempts = 0,
        queued_at = excluded.queued_at, next_attempt_at = excluded.next_attempt_at, lease_until = null,
        lease_token = null, delivered_at = null
      returning 1
    )
    select count(*)::int as n from queued`.execute(tx);
  return Number(rows[0]?.n ?? 0);
}

/**
 * Of `candidates`, the keys some row is named by: an endpoint row, a dispatch position or a
 * delivery. With `legacy`, every key in the legacy form (32 hex digits) as well: the deliveries'
 * distinct keys are walked through event_deliveries_endpoint (url_key, ...), one index step per
 * key (there are as many keys as endpoints ever), never a scan of the deliveries.
 */
export async function storedEndpointKeys(db: Kysely<Tables>, candidates: readonly string[], legacy: boolean): Promise<string[]> {
  const { rows } = await sql<{ key: string }>`
    with recursive walk(key) as (
      (select url_key from event_deliveries order by url_key limit 1)
      union all
      select (select d.url_key from event_deliveries d where d.url_key > w.key order by d.url_key limit 1) from walk w where w.key is not null
    ),
    keys(key) as (
      select key from walk where key is not null
      union select key from event_endpoints
      union select url_key from event_dispatch
    )
    select key from keys
    where key = any(${candidates}::text[]) or (${legacy}::boolean and key ~ '^[0-9a-f]{32}$')`.execute(db);
  return rows.map((r) => r.key);
}

/**
 * Renames an endpoint key in every row that names it (the endpoint, its dispatch position, its
 * deliveries), in the caller's transaction. Where rows under both keys exist (an instance on older
 * code wrote the old form again), the older endpoint row and the earlier dispatch position are
 * kept, and a delivery of an event that already has one under `to` is dropped.
 */
export async function renameEndpointKey(tx: Transaction<Tables>, from: string, to: string): Promise<void> {
  await sql`
    delete from event_endpoints n using event_endpoints o
    where ((n.key = ${from} and o.key = ${to}) or (n.key = ${to} and o.key = ${from})) and (n.created_at, n.id) > (o.created_at, o.id)`.execute(tx);
  await tx.updateTable('event_endpoints').set({ key: to }).where('key', '=', from).execute();
  await sql`
    update event_dispatch n set tx_id = o.tx_id, event_id = o.event_id
    from event_dispatch o
    where n.url_key = ${to} and o.url_key = ${from} and (o.tx_id, o.event_id) < (n.tx_id, n.event_id)`.execute(tx);
  await sql`delete from event_dispatch o where o.url_key = ${from} and exists (select 1 from event_dispatch n where n.url_key = ${to})`.execute(tx);
  await tx.updateTable('event_dispatch').set({ url_key: to }).where('url_key', '=', from).execute();
  await sql`
    delete from event_deliveries o
    where o.url_key = ${from} and exists (select 1 from event_deliveries n where n.event_id = o.event_id and n.url_key = ${to})`.execute(tx);
  await tx.updateTable('event_deliveries').set({ url_key: to }).where('url_key', '=', from).execute();
}

/** Serialises the re-keying of endpoints across instances starting together. */
const REKEY_LOCK_ID = 7302512093411875001n;

/** Renames each key `from` to `to` (renameEndpointKey), all in one transaction, one instance at a time. */
export async function renameEndpointKeys(db: Kysely<Tables>, renames: ReadonlyMap<string, string>): Promise<void> {
  await db.transaction().execute(async (tx) => {
    await sql`select pg_advisory_xact_lock(${sql.lit(REKEY_LOCK_ID)})`.execute(tx);
    for (const [from, to] of renames) await renameEndpointKey(tx, from, to);
  });
}

const AT = new Date('2026-01-01T00:00:00Z');
const ENDPOINT = { id: 'ep_1', key: 'k', shown_url: 'https://receiver.example/hook', types: ['underwriting.completed'], status: 'paused', secret: 's' } as EndpointRow;
const NEW_ENDPOINT: NewEndpoint = {
  id: 'ep_1',
  key: 'k',
  managed: 'api',
  url: 'https://receiver.example/hook',
  shownUrl: 'https://receiver.example/hook',
  description: '',
  types: null,
  rateLimitPerS: null,
  maxInFlight: null,
  secret: 's',
};
const EVERY_CHANGE: EndpointChange = {
  url: { url: 'https://receiver.example/new', shownUrl: 'https://receiver.example/new' },
  description: 'd',
  types: ['underwriting.completed'],
  rateLimitPerS: 10,
  maxInFlight: 2,
  status: 'active',
};

/**
 * The endpoints' queries as `npm run sql:snapshot` writes them (docs/layout.md); those whose shape
 * depends on their input with the least and with the most of it.
 */
export const SQL_SNAPSHOTS: readonly SqlSnapshot[] = [
  { name: 'read_endpoints', run: (db) => readEndpoints(db) },
  { name: 'endpoint_keys_api', run: (db) => endpointKeys(db, []) },
  { name: 'endpoint_keys', run: (db) => endpointKeys(db, ['k']) },
  { name: 'read_endpoint', run: (db) => readEndpoint(db, 'ep_1') },
  { name: 'read_endpoint_stats', run: (db) => readEndpointStats(db, ['k']) },
  { name: 'insert_endpoint', rows: [[{ id: 'ep_1' }], [{ horizon: '9' }]], run: (db) => db.transaction().execute((tx) => insertEndpoint(tx, NEW_ENDPOINT, AT)) },
  { name: 'sync_configured_endpoints', run: (db) => syncConfiguredEndpoints(db, [{ key: 'k', shown: 'https://receiver.example/hook' }], AT) },
  { name: 'update_endpoint', rows: [[{ id: 'ep_1' }]], run: (db) => db.transaction().execute((tx) => updateEndpoint(tx, ENDPOINT, { description: 'd' }, AT)) },
  { name: 'update_endpoint_every_change', rows: [[{ id: 'ep_1' }]], run: (db) => db.transaction().execute((tx) => updateEndpoint(tx, ENDPOINT, EVERY_CHANGE, AT)) },
  { name: 'delete_endpoint', run: (db) => db.transaction().execute((tx) => deleteEndpoint(tx, ENDPOINT, AT)) },
  { name: 'rotate_endpoint_secret', run: (db) => db.transaction().execute((tx) => rotateEndpointSecret(tx, ENDPOINT, 's2', new Date(AT.getTime() + 60_000), AT)) },
  { name: 'clear_expired_secrets', run: (db) => clearExpiredSecrets(db, AT) },
  { name: 'replay_since', run: (db) => replayToEndpoint(db, ENDPOINT, { since: AT.toISOString() }, AT) },
  { name: 'replay_after', run: (db) => replayToEndpoint(db, ENDPOINT, { after: { tx: '9', id: 1 } }, AT) },
  { name: 'stored_endpoint_keys', run: (db) => storedEndpointKeys(db, ['k'], true) },
  { name: 'rename_endpoint_keys', run: (db) => renameEndpointKeys(db, new Map([['old', 'k']])) },
];

export type { EndpointStatus };
