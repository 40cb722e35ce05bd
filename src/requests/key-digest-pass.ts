import type { FastifyBaseLogger } from 'fastify';
import { type Kysely, sql } from 'kysely';
import { keepRunningPass, PASS_EVERY_MS, PASS_GOES_ON_MS } from '../db/maintenance-pass.js';
import type { SqlSnapshot } from '../db/statements.js';
import type { Tables } from '../db/types.js';
import { IDEMPOTENCY_TTL_MS } from './idempotency.js';
import { isKeyDigest, type KeyDigester, keyDigester } from './key-digest.js';

/** Its row in maintenance_passes (migration 0024). */
export const KEY_DIGEST_PASS = 'idempotency_key_digests';
const BATCH = 1000;
export { PASS_EVERY_MS, PASS_GOES_ON_MS };

/** Runs the pass now and hourly until it is over (db/maintenance-pass.ts), rewriting what it finds. */
export function keepDigestingKeys(deps: {
  db: Kysely<Tables>;
  digests: KeyDigester;
  now: () => Date;
  log: Pick<FastifyBaseLogger, 'info' | 'warn'>;
  signal: AbortSignal;
  everyMs?: number;
}): { settled: () => Promise<void> } {
  return keepRunningPass({
    run: (signal) => digestStoredKeys(deps.db, deps.digests, deps.now, signal),
    did: 'Idempotency-Keys stored as sent by an earlier version are now stored as digests',
    failed: 'could not rewrite Idempotency-Keys stored as sent; the next run goes on',
    log: deps.log,
    signal: deps.signal,
    ...(deps.everyMs === undefined ? {} : { everyMs: deps.everyMs }),
  });
}

export interface KeyDigestPass {
  /** Rows rewritten in each table. */
  idempotencyKeys: number;
  requests: number;
  campaigns: number;
}

/**
 * Rewrites the Idempotency-Keys that a version before digests stored as sent (requests/key-digest.ts)
 * as their digests under the first CPF_HASH_KEY: the keys' own rows and campaigns (a day's worth,
 * read whole), and the requests (every row ever, read once by id: the pass records how far it got,
 * and a later start goes on from there). Undefined when the pass is over (finished more than
 * PASS_GOES_ON_MS ago). Stops between batches once `signal` aborts (the instance is closing).
 *
 * Only past the key's 24 h (IDEMPOTENCY_TTL_MS, CAMPAIGN_KEY_TTL_MS): within them an instance of
 * the version before, still running during a rolling deploy, looks the key up as sent (its row, its
 * request after a takeover, its campaign) and, not finding it, would take it anew and call the
 * provider a second time. A key's row past them names nothing and is deleted; the requests are read
 * up to the first one within them, where a later start goes on.
 */
export async function digestStoredKeys(
  db: Kysely<Tables>,
  digests: KeyDigester,
  now: () => Date,
  signal: AbortSignal,
): Promise<KeyDigestPass | undefined> {
  await db.insertInto('maintenance_passes').values({ name: KEY_DIGEST_PASS }).onConflict((oc) => oc.column('name').doNothing()).execute();
  const pass = await db.selectFrom('maintenance_passes').select(['through_id', 'finished_at']).where('name', '=', KEY_DIGEST_PASS).executeTakeFirst();
  if (pass?.finished_at && now().getTime() - pass.finished_at.getTime() > PASS_GOES_ON_MS) return undefined;
  const done: KeyDigestPass = { idempotencyKeys: 0, requests: 0, campaigns: 0 };
  const at = now();
  const dayBefore = new Date(at.getTime() - IDEMPOTENCY_TTL_MS);

  // The keys' own rows, in key order: one stored as sent is deleted once its 24 h are over.
  let after = '';
  for (;;) {
    if (signal.aborted) return done;
    const rows = await db.selectFrom('idempotency_keys').select('key').where('key', '>', after).orderBy('key').limit(BATCH).execute();
    if (rows.length === 0) break;
    after = rows[rows.length - 1]!.key;
    for (const { key } of rows) if (!isKeyDigest(key)) done.idempotencyKeys += await dropExpiredKeyRow(db, key, at);
  }

  const campaigns = await db
    .selectFrom('campaigns')
    .select(['id', 'idempotency_key'])
    .where('idempotency_key', 'is not', null)
    .where('created_at', '<=', dayBefore)
    .execute();
  for (const c of campaigns) {
    if (signal.aborted) return done;
    if (c.idempotency_key !== null && !isKeyDigest(c.idempotency_key)) done.campaigns += await digestCampaignKey(db, Number(c.id), c.idempotency_key, digests.digest(c.idempotency_key));
  }

  let through = Number(pass?.through_id ?? 0);
  for (;;) {
    if (signal.aborted) return done;
    const read = await db
      .selectFrom('underwriting_requests')
      .select(['id', 'idempotency_key', 'submitted_at'])
      .where('id', '>', through)
      .orderBy('id')
      .limit(BATCH)
      .execute();
    // Up to the first request within its key's 24 h (requestOfKey's window): a later start goes on from there.
    const young = read.findIndex((r) => r.submitted_at > dayBefore);
    const rows = young === -1 ? read : read.slice(0, young);
    if (rows.length > 0) {
      const plain = rows.filter((r) => r.idempotency_key !== null && !isKeyDigest(r.idempotency_key));
      if (plain.length > 0) done.requests += await digestRequestKeys(db, plain as { id: number; idempotency_key: string }[], digests);
      through = Number(rows[rows.length - 1]!.id);
      await db.updateTable('maintenance_passes').set({ through_id: through }).where('name', '=', KEY_DIGEST_PASS).execute();
    }
    if (young !== -1 || read.length < BATCH) break;
  }
  await sql`update maintenance_passes set finished_at = coalesce(finished_at, ${now()}) where name = ${KEY_DIGEST_PASS}`.execute(db);
  return done;
}

/** One key's row stored as sent, deleted once its 24 h are over (it names nothing then: claimKey takes an expired key anew). */
async function dropExpiredKeyRow(db: Kysely<Tables>, key: string, now: Date): Promise<number> {
  const gone = await sql`delete from idempotency_keys where key = ${key} and expires_at <= ${now}`.execute(db);
  return Number(gone.numAffectedRows ?? 0);
}

/** A campaign's key, as its digest; when another campaign holds the digest already, this one's key is freed. */
async function digestCampaignKey(db: Kysely<Tables>, id: number, key: string, digest: string): Promise<number> {
  const moved = await sql`update campaigns set idempotency_key = ${digest}
    where id = ${id} and idempotency_key = ${key} and not exists (select 1 from campaigns where idempotency_key = ${digest})`.execute(db);
  if (Number(moved.numAffectedRows ?? 0) > 0) return 1;
  const freed = await sql`update campaigns set idempotency_key = null where id = ${id} and idempotency_key = ${key}`.execute(db);
  return Number(freed.numAffectedRows ?? 0);
}

/** A batch of requests' keys, as their digests (a row whose key changed meanwhile is left alone). */
async function digestRequestKeys(db: Kysely<Tables>, rows: readonly { id: number; idempotency_key: string }[], digests: KeyDigester): Promise<number> {
  const result = await sql`update underwriting_requests r set idempotency_key = v.digest
    from (select unnest(${rows.map((r) => r.id)}::bigint[]) as id, unnest(${rows.map((r) => r.idempotency_key)}::text[]) as key,
                 unnest(${rows.map((r) => digests.digest(r.idempotency_key))}::text[]) as digest) v
    where r.id = v.id and r.idempotency_key = v.key`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}

/** The pass's statements as `npm run sql:snapshot` writes them (docs/layout.md). */
export const SQL_SNAPSHOTS: readonly SqlSnapshot[] = [
  { name: 'digest_stored_keys', run: (db) => digestStoredKeys(db, keyDigester(['h']), () => new Date(0), new AbortController().signal) },
  { name: 'drop_expired_key_row', run: (db) => dropExpiredKeyRow(db, 'k', new Date(0)) },
  { name: 'digest_campaign_key', run: (db) => digestCampaignKey(db, 1, 'k', '§d') },
  { name: 'digest_request_keys', run: (db) => digestRequestKeys(db, [{ id: 1, idempotency_key: 'k' }], keyDigester(['h'])) },
];
