import { type Kysely, sql } from 'kysely';
import { runStatement } from '../db/run-statement.js';
import { defineStatement, type SqlSnapshot, type Statement } from '../db/statements.js';
import type { CampaignSource, CampaignStatus, Decision, RequestStatus, Tables } from '../db/types.js';
import { EVENT_TYPE, requestEventsSql } from '../events/record.js';
import type { ValidationIssue } from '../http/errors.js';
import type { Position } from '../http/cursor.js';
import { REQUEST_DATA_COLUMNS } from '../requests/sql.js';
import { type KeyDigester, keyDigester } from '../requests/key-digest.js';
import { INDEX_LOOKUPS_ONLY } from '../db/plan-guards.js';

// A campaign's SQL: its row, its requests' counts and results (through the partial index
// underwriting_requests_campaign, migration 0018), and its cancellation.

export interface RejectedLine {
  line: number;
  issues: ValidationIssue[];
}

export interface CampaignRow {
  id: number;
  public_id: string;
  created_at: Date;
  updated_at: Date;
  status: CampaignStatus;
  source: CampaignSource;
  created_by: string;
  accepted: number;
  rejected: number;
  rejected_lines: RejectedLine[];
  uploaded_at: Date | null;
  upload_error: string | null;
  cancelled_at: Date | null;
}

const CAMPAIGN_COLUMNS = `id, public_id, created_at, updated_at, status, source, created_by, accepted, rejected, rejected_lines,
  uploaded_at, upload_error, cancelled_at`;

export async function insertCampaign(
  db: Kysely<Tables>,
  c: { publicId: string; source: CampaignSource; createdBy: string; now: Date },
): Promise<number> {
  const { rows } = await sql<{ id: number }>`
    insert into campaigns (public_id, source, created_by, created_at, updated_at)
    values (${c.publicId}, ${c.source}, ${c.createdBy}, ${c.now}, ${c.now})
    returning id`.execute(db);
  return Number(rows[0]!.id);
}

/** A campaign's Idempotency-Key names it for this long; after that the key is free again (as a submit's). */
export const CAMPAIGN_KEY_TTL_MS = 24 * 3600 * 1000;

/** What a retry with the same Idempotency-Key is judged by, and answered from. */
export interface KeyedCampaign {
  id: number;
  public_id: string;
  source: CampaignSource;
  status: CampaignStatus;
  accepted: number;
  rejected: number;
  rejected_lines: RejectedLine[];
  uploaded_at: Date | null;
  upload_error: string | null;
  updated_at: Date;
  body_digest: string | null;
}

/**
 * The form a campaign's Idempotency-Key is stored in (requests/key-digest.ts): the one a campaign
 * holding it within CAMPAIGN_KEY_TTL_MS was stored with (its digest under an earlier CPF_HASH_KEY,
 * or the key as sent, by a version before digests), else its digest now. A key older than that
 * names nothing: its form would only be used to make a new campaign, which takes the digest now.
 */
export async function storedCampaignKeyOf(db: Kysely<Tables>, digests: KeyDigester, key: string, now: Date): Promise<string> {
  const { rows } = await storedCampaignKeyQuery(digests.candidates(key), now).execute(db);
  return rows[0]?.idempotency_key ?? digests.digest(key);
}

/** storedCampaignKeyOf's statement: the newest campaign within the TTL among a key's stored forms (by its unique index, test/db/plan-states-keys.test.ts). */
export function storedCampaignKeyQuery(forms: readonly string[], now: Date) {
  return sql<{ idempotency_key: string }>`
    select idempotency_key from campaigns where idempotency_key in (${sql.join(forms)})
       and created_at > ${new Date(now.getTime() - CAMPAIGN_KEY_TTL_MS)}
     order by created_at desc limit 1`;
}

/**
 * Takes an Idempotency-Key by inserting its campaign (atomic across instances: the unique index
 * campaigns_idempotency_key, migration 0021); a key older than CAMPAIGN_KEY_TTL_MS is freed first.
 * Returns the new campaign's id, or the campaign that holds the key. `insert: false` for a key in
 * an earlier form (storedCampaignKeyOf): only its holder is read, none when it is gone (freed, or
 * rewritten as its digest by the pass), and the caller looks again; a campaign is only ever made
 * under the digest now, never with the key as sent.
 */
export async function claimCampaignKey(
  db: Kysely<Tables>,
  c: { key: string; publicId: string; source: CampaignSource; createdBy: string; now: Date; insert?: boolean },
): Promise<{ claimed: number } | { holder: KeyedCampaign | undefined }> {
  const cutoff = new Date(c.now.getTime() - CAMPAIGN_KEY_TTL_MS);
  if (c.insert !== false) {
    await sql`update campaigns set idempotency_key = null
       where idempotency_key = ${c.key} and created_at <= ${cutoff}`.execute(db);
    const { rows } = await sql<{ id: number }>`
      insert into campaigns (public_id, source, created_by, created_at, updated_at, idempotency_key)
      values (${c.publicId}, ${c.source}, ${c.createdBy}, ${c.now}, ${c.now}, ${c.key})
      on conflict (idempotency_key) where idempotency_key is not null do nothing
      returning id`.execute(db);
    if (rows[0]) return { claimed: Number(rows[0].id) };
  }
  const { rows: held } = await sql<KeyedCampaign>`
    select id, public_id, source, status, accepted, rejected, rejected_lines, uploaded_at, upload_error, updated_at, body_digest
      from campaigns where idempotency_key = ${c.key} and created_at > ${cutoff}`.execute(db);
  return { holder: held[0] && { ...held[0], id: Number(held[0].id) } };
}

/**
 * Removes a keyed campaign whose upload failed before queueing anything (its key's claim made the
 * row first): as an upload without a key, which makes its row with its first batch, it leaves
 * nothing. False (nothing removed) once it holds a request, or once it was cancelled (a cancel
 * answered 202 is not undone into a 404).
 */
export async function dropUnqueuedCampaign(db: Kysely<Tables>, id: number): Promise<boolean> {
  const { numAffectedRows } = await sql`delete from campaigns c where c.id = ${id} and c.status = 'running'
    and not exists (select 1 from underwriting_requests r where r.campaign_id = c.id)`.execute(db);
  return Number(numAffectedRows ?? 0) > 0;
}

/** Frees a campaign's key (its upload failed: a retry with the key uploads anew). */
export async function releaseCampaignKey(db: Kysely<Tables>, id: number): Promise<void> {
  await sql`update campaigns set idempotency_key = null where id = ${id}`.execute(db);
}

/**
 * Holds the campaign against a cancel for one batch of its upload (a share lock: batches written
 * at once do not wait for each other; cancel's update waits for them, and a batch that comes after
 * it sees it), and says whether it was cancelled meanwhile.
 */
export async function lockForBatch(trx: Kysely<Tables>, id: number): Promise<{ cancelled: boolean }> {
  const { rows } = await sql<{ status: CampaignStatus }>`select status from campaigns where id = ${id} for share`.execute(trx);
  return { cancelled: rows[0]?.status !== 'running' };
}

/**
 * Counts a batch in once it is committed (its own short statement, outside the batch's
 * transaction, so concurrent batches never wait on the row); also the upload's heartbeat
 * (updated_at: see views.ts).
 */
export async function countBatch(db: Kysely<Tables>, id: number, batch: { accepted: number; rejected: number; now: Date }): Promise<void> {
  await sql`update campaigns set accepted = accepted + ${batch.accepted}, rejected = rejected + ${batch.rejected}, updated_at = ${batch.now}
    where id = ${id}`.execute(db);
}

/**
 * The upload's heartbeat while its file arrives between batches: a slow upload (fewer lines than a
 * batch in UPLOAD_SILENT_MS) is alive, not over (views.ts).
 */
export async function touchUpload(db: Kysely<Tables>, id: number, now: Date): Promise<void> {
  await sql`update campaigns set updated_at = ${now} where id = ${id} and status = 'running' and uploaded_at is null`.execute(db);
}

/** The upload has been read whole: the final counts, the first rejected lines, and the file's digest (SHA-256, hex). */
export async function finishUpload(
  db: Kysely<Tables>,
  id: number,
  done: { accepted: number; rejected: number; rejectedLines: RejectedLine[]; now: Date; bodyDigest: string | null },
): Promise<void> {
  await sql`update campaigns
      set accepted = ${done.accepted}, rejected = ${done.rejected}, rejected_lines = ${JSON.stringify(done.rejectedLines)}::jsonb,
          uploaded_at = ${done.now}, updated_at = ${done.now}, body_digest = ${done.bodyDigest}
    where id = ${id}`.execute(db);
}

/** Requests a cancel ends per statement (each its own transaction, rows the forwarder holds skipped). */
export const CANCEL_BATCH = 5000;

/**
 * Ends up to CANCEL_BATCH of the campaign's queued requests as `cancelled`, their sealed bodies
 * cleared, each with its underwriting.cancelled event, in one statement. Returns how many.
 */
export const CANCEL_QUEUED = defineStatement('cancel_campaign_queued', `
    with target as (
      -- Through underwriting_requests_campaign_open (no order: the queue's index would walk every queued request).
      select id from underwriting_requests
       where campaign_id = $1 and status = 'queued'
       limit $3
       for update skip locked
    ),
    cancelled as (
      -- One primary-key lookup per id (a join let the planner hash the whole table).
      update underwriting_requests r
         set status = 'cancelled', queued_body = null, updated_at = $2
       where r.id = any (array(select id from target))
      returning ${REQUEST_DATA_COLUMNS}
    ),
    ${requestEventsSql(EVENT_TYPE.cancelled, 'cancelled')}
    select count(*)::int as n from cancelled`);

/**
 * Cancels the campaign: its row first (under the lock its upload's batches take, so none is
 * queued after this), then every request still queued, in batches. Requests already claimed by
 * the forwarder go on. Returns how many were cancelled; undefined for an unknown campaign.
 */
export async function cancelCampaign(db: Kysely<Tables>, publicId: string, now: Date): Promise<{ cancelled: number } | undefined> {
  const { rows } = await sql<{ id: number }>`
    update campaigns set status = 'cancelled', cancelled_at = coalesce(cancelled_at, ${now}), updated_at = ${now}
     where public_id = ${publicId}
    returning id`.execute(db);
  if (rows.length === 0) return undefined;
  return { cancelled: await cancelQueued(db, Number(rows[0]!.id), now) };
}

/** Every queued request of a campaign ends cancelled, in batches. */
export async function cancelQueued(db: Kysely<Tables>, id: number, now: Date): Promise<number> {
  let total = 0;
  for (;;) {
    const [row] = await runStatement<{ n: number }>(db, CANCEL_QUEUED, [id, now.toISOString(), CANCEL_BATCH]);
    const n = Number(row?.n ?? 0);
    total += n;
    if (n < CANCEL_BATCH) return total;
  }
}

/** An upload that failed part-way: what it queued is cancelled, and the campaign says why. */
export async function abandonUpload(db: Kysely<Tables>, id: number, reason: string, now: Date): Promise<number> {
  await sql`update campaigns set status = 'cancelled', upload_error = ${reason}, cancelled_at = coalesce(cancelled_at, ${now}), updated_at = ${now}
    where id = ${id}`.execute(db);
  return cancelQueued(db, id, now);
}

export async function readCampaignRow(db: Kysely<Tables>, publicId: string): Promise<CampaignRow | undefined> {
  const { rows } = await sql<CampaignRow>`select ${sql.raw(CAMPAIGN_COLUMNS)} from campaigns where public_id = ${publicId}`.execute(db);
  return rows[0] && { ...rows[0], id: Number(rows[0].id) };
}

export interface CountRow {
  status: RequestStatus;
  decision: Decision | null;
  n: number;
  /** Of these, forwarded to the provider since the rate window's start. */
  recent: number;
}

/**
 * A campaign's requests counted by status and decision, and how many were forwarded since
 * `since`: one grouped index-only scan of underwriting_requests_campaign.
 */
export const COUNT_CAMPAIGN = defineStatement('count_campaign', `
    select status, decision, count(*)::int as n,
           (count(*) filter (where status not in ('queued', 'cancelled') and submitted_at >= $2))::int as recent
      from underwriting_requests
     where campaign_id = $1
     group by status, decision`);

export async function countCampaign(db: Kysely<Tables>, id: number, since: Date): Promise<CountRow[]> {
  return runStatement<CountRow>(db, COUNT_CAMPAIGN, [id, since.toISOString()]);
}

/**
 * Whether the provider is not being called now: its circuit open, or every instance told to hold
 * (a 429's or 503's Retry-After, an operator's hold). By the database's clock, as the pace is kept.
 */
export const PROVIDER_PAUSED = defineStatement('campaign_provider_paused', `
    select coalesce(open_until > clock_timestamp(), false) or hold_until > clock_timestamp() as paused
      from provider_pacing where id = 1`);

export async function providerPaused(db: Kysely<Tables>): Promise<boolean> {
  const [row] = await runStatement<{ paused: boolean }>(db, PROVIDER_PAUSED, []);
  return row?.paused === true;
}

/** Marks a campaign done once its counts show nothing in flight (a courtesy for the list; GET computes it anyway). */
export async function markDone(db: Kysely<Tables>, id: number, now: Date): Promise<void> {
  await sql`update campaigns set status = 'done', updated_at = ${now} where id = ${id} and status = 'running'`.execute(db);
}

export interface ResultRow {
  id: number;
  customer_uuid: string;
  status: RequestStatus;
  decision: Decision | null;
  cpf_masked: string;
  completed_at: Date | null;
  /** The stored result's `response` object, or null. */
  response: { score?: unknown; riskBand?: unknown; limit?: unknown } | null;
}

/** One page of a campaign's results in file order (keyset on id, through underwriting_requests_campaign). */
export const RESULTS_PAGE = defineStatement('campaign_results_page', `
    select r.id, r.customer_uuid, r.status, r.decision, r.cpf_masked, r.completed_at,
           -- By primary key per row: the result's response only.
           (select c.body -> 'response' from callbacks c where c.id = r.result_callback_id) as response
      from underwriting_requests r
     -- The position as a row of the index's own columns: only underwriting_requests_campaign serves
     -- it (with r.id > $2 alone the planner may walk the primary key, filtering out other rows).
     where r.campaign_id = $1 and (r.campaign_id, r.id) > ($1::bigint, $2::bigint)
     order by r.campaign_id, r.id
     limit $3`);

export async function resultsPage(db: Kysely<Tables>, id: number, afterId: number, limit: number): Promise<ResultRow[]> {
  const rows = await runStatement<ResultRow>(db, RESULTS_PAGE, [id, afterId, limit]);
  return rows.map((r) => ({ ...r, id: Number(r.id) }));
}

export interface ListRow {
  id: number;
  public_id: string;
  created_at: Date;
  status: CampaignStatus;
  source: CampaignSource;
  accepted: number;
  rejected: number;
  uploaded_at: Date | null;
  updated_at: Date;
  upload_error: string | null;
  /** A request of it is queued, being sent or awaiting its callback (underwriting_requests_campaign_open). */
  open: boolean;
  position_t: string;
}

/** Campaigns, newest first, by keyset on (created_at, id) through campaigns_list. */
export function listQuery(after: Position | undefined, limit: number) {
  return sql<ListRow>`
    select c.id, c.public_id, c.created_at, c.status, c.source, c.accepted, c.rejected, c.uploaded_at, c.updated_at, c.upload_error,
           exists (select 1 from underwriting_requests r
                    where r.campaign_id = c.id and r.status in ('queued', 'submitting', 'submitted')) as open,
           to_char(c.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as position_t
      from campaigns c
     ${after ? sql`where (c.created_at, c.id) < (${after.t}::timestamptz, ${after.id}::bigint)` : sql``}
     order by c.created_at desc, c.id desc
     limit ${limit + 1}`;
}

/**
 * The page, in a transaction that forbids sequential scans: for an EXISTS the planner guesses a
 * scan of the requests finds a row at once, and for a campaign with nothing in flight it reads the
 * whole table; the open-requests index answers each probe in one lookup.
 */
export async function listCampaigns(db: Kysely<Tables>, after: Position | undefined, limit: number): Promise<ListRow[]> {
  const rows = await db.transaction().execute(async (trx) => {
    await INDEX_LOOKUPS_ONLY.execute(trx);
    return (await listQuery(after, limit).execute(trx)).rows;
  });
  return rows.map((r) => ({ ...r, id: Number(r.id) }));
}

/**
 * Campaigns counted by status as the API shows it (views.ts): a running campaign whose upload is
 * over (read whole, failed, or silent since `silentSince`) with nothing queued, being sent or
 * awaiting its callback is done. One probe of underwriting_campaign_open per running campaign
 * only (the CASE), in a transaction without sequential scans (as listCampaigns).
 */
export async function countCampaignsByStatus(db: Kysely<Tables>, silentSince: Date): Promise<Array<{ status: CampaignStatus; n: number }>> {
  return db.transaction().execute(async (trx) => {
    await INDEX_LOOKUPS_ONLY.execute(trx);
    const { rows } = await sql<{ status: CampaignStatus; n: number }>`
      select case
               when c.status <> 'running' then c.status
               when (c.uploaded_at is not null or c.upload_error is not null or c.updated_at < ${silentSince})
                    and not exists (select 1 from underwriting_requests r
                                     where r.campaign_id = c.id and r.status in ('queued', 'submitting', 'submitted')) then 'done'
               else 'running'
             end as status,
             count(*)::int as n
        from campaigns c
       group by 1`.execute(trx);
    return rows.map((r) => ({ status: r.status, n: Number(r.n) }));
  });
}

const AT = new Date('2026-01-01T00:00:00Z');
const NEW_CAMPAIGN = { publicId: 'cmp_1', source: 'ndjson' as const, createdBy: 'key:0', now: AT };

/**
 * The campaigns' queries besides their named statements, as `npm run sql:snapshot` writes them
 * (docs/layout.md); the list from its start and after a position.
 */
export const SQL_SNAPSHOTS: readonly SqlSnapshot[] = [
  { name: 'insert_campaign', rows: [[{ id: 1 }]], run: (db) => insertCampaign(db, NEW_CAMPAIGN) },
  // The key held by another campaign: the three statements a claim may send.
  { name: 'stored_campaign_key_of', run: (db) => storedCampaignKeyOf(db, keyDigester(['h']), 'k', new Date(0)) },
  { name: 'claim_campaign_key', run: (db) => claimCampaignKey(db, { ...NEW_CAMPAIGN, key: 'k' }) },
  { name: 'release_campaign_key', run: (db) => releaseCampaignKey(db, 1) },
  { name: 'lock_for_batch', run: (db) => lockForBatch(db, 1) },
  { name: 'count_batch', run: (db) => countBatch(db, 1, { accepted: 1, rejected: 0, now: AT }) },
  { name: 'touch_upload', run: (db) => touchUpload(db, 1, AT) },
  { name: 'finish_upload', run: (db) => finishUpload(db, 1, { accepted: 1, rejected: 0, rejectedLines: [], now: AT, bodyDigest: null }) },
  { name: 'cancel_campaign', rows: [[{ id: 1 }]], run: (db) => cancelCampaign(db, 'cmp_1', AT) },
  { name: 'abandon_upload', run: (db) => abandonUpload(db, 1, 'upload_failed', AT) },
  { name: 'read_campaign_row', run: (db) => readCampaignRow(db, 'cmp_1') },
  { name: 'mark_done', run: (db) => markDone(db, 1, AT) },
  { name: 'list_campaigns', run: (db) => listCampaigns(db, undefined, 50) },
  { name: 'list_campaigns_after', run: (db) => listCampaigns(db, { t: '2026-01-01T12:00:00.000000Z', id: 1 }, 50) },
  { name: 'count_campaigns_by_status', run: (db) => countCampaignsByStatus(db, AT) },
];
