import type { Kysely } from 'kysely';
import { runStatement } from '../db/run-statement.js';
import { defineStatement, NOT_WAITED_TO_DISK, type Statement } from '../db/statements.js';
import type { Tables } from '../db/types.js';
import { EVENT_TYPE, recordEventsSql, requestDataSql, requestEventsSql } from '../events/record.js';
import type { UnderwritingRequest } from '../provider/schemas.js';
import { answeredSlotsSql } from '../provider/sql.js';
import { REQUEST_DATA_COLUMNS } from '../requests/sql.js';
import type { Sealer } from './seal.js';
import { storedForm } from './stored-form.js';
import { hashCpf } from '../cpf.js';

// The durable submit queue (Prefer: respond-async, campaigns): its statements. The forwarder
// (forwarder.ts) claims from it at the provider's pace; see docs/provider-pacing.md.

/** One validated submit to queue. */
export interface QueuedSubmit {
  /** Validated exactly as a synchronous submit's body (submitBodySchema). */
  body: UnderwritingRequest;
  idempotencyKey?: string | undefined;
  /** Sent to the provider as X-Request-Id when forwarded, and carried by the request's events. */
  xRequestId: string;
  /** W3C traceparent the forward and the events continue; null with tracing off. */
  traceparent: string | null;
}

export interface EnqueueOptions {
  now: Date;
  /** CPF_HASH_KEY's first key: hashes the CPF for lookups, as a synchronous submit. */
  cpfHashKey: string;
  /** Seals the body to forward (it holds the full CPF). */
  sealer: Sealer;
  /** hashCpf under cpfHashKey, made once for many submits (cpfHasher); hashCpf itself when absent. */
  hashCpf?: ((cpf: string) => string) | undefined;
  /** Written to underwriting_requests.campaign_id (a column migration 0018 adds); omit it before then. */
  campaignId?: string | number | undefined;
}

/** Per submit, in the order given: its request id, or null when its customer already has a request in flight (or earlier in the same batch, or, with a campaign, in that campaign). */
export type EnqueueResult = { id: number } | null;

/** Rows per enqueue statement at most: callers give more, they are written in batches of this size (each its own statement). */
export const ENQUEUE_BATCH = 4000;

function enqueueStatement(withCampaign: boolean): Statement {
  // One statement per batch, its rows as one array per column ($1-$8, zipped by ROWS FROM: no
  // per-row JSON to build here or to parse there) and srd as one JSON array ($9: its text needs no
  // escaping as an array element would); $10 the time, $11 the campaign.
  return defineStatement(withCampaign ? 'enqueue_submits_campaign' : 'enqueue_submits', `
    with input as (
      select * from rows from (
          unnest($1::text[]), unnest($2::text[]), unnest($3::text[]), unnest($4::boolean[]),
          unnest($5::text[]), unnest($6::text[]), unnest($7::text[]), unnest($8::text[]),
          jsonb_array_elements($9::jsonb)
        ) with ordinality as i(customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, idempotency_key, queued_body, traceparent, x_request_id, srd, n)
    ),
    numbered as (
      -- Ids in the batch's order (a campaign's: its file's, the order of its results), taken before
      -- the rows are inserted in another (a CTE with a volatile function is computed once, as written).
      select i.*, nextval('underwriting_requests_id_seq') as id from input i order by i.n
    ),
    queued as (
      insert into underwriting_requests
        (id, customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, srd, status, idempotency_key,
         submitted_at, updated_at, queued_at, queued_body, traceparent, x_request_id${withCampaign ? ', campaign_id' : ''})
      overriding system value
      select i.id, i.customer_uuid, i.cpf_hash, i.cpf_masked, i.cost_saving_enabled, nullif(i.srd, 'null'::jsonb), 'queued', i.idempotency_key,
             $10, $10, $10, decode(i.queued_body, 'base64'), i.traceparent, i.x_request_id${withCampaign ? ', $11' : ''}
      from numbered i${withCampaign ? `
      -- A customer an earlier line of the campaign's file named, whose request is no longer in flight
      -- (answered, failed): a file names each customer once. One lookup of the customer's requests per
      -- row (underwriting_requests_customer): offset 0 keeps it from becoming a join. The campaign's
      -- indexes, whose every entry so far it would read per row, are kept out of it: they hold only
      -- rows with a campaign, and coalesce (not strict, unlike + 0) does not tell the planner that
      -- these are such rows. Statistics taken before a first campaign made them look empty, the
      -- cheapest of all, and each line read every entry the campaign had so far. Bounded below by the
      -- campaign's first request (one probe of the campaign's index, once per statement): the
      -- customer's requests from before the campaign, however many, are not read.
      where not exists (
        select 1 from underwriting_requests e
         where e.customer_uuid = i.customer_uuid
           and e.id >= (select min(f.id) from underwriting_requests f where f.campaign_id = $11)
           and coalesce(e.campaign_id, 0) = $11
        offset 0)` : ''}
      -- Inserted in one order whatever the batch (byte order, as insert_submitting's): two batches
      -- naming the same customers in other orders (two campaigns at once) wait on each other's
      -- in-flight index entries instead of deadlocking; within a customer, the batch's order.
      order by i.customer_uuid collate "C", i.n
      -- A customer with a request queued or awaiting its callback (underwriting_requests_one_in_flight),
      -- or twice in one batch: the later one is not queued.
      on conflict do nothing
      returning ${REQUEST_DATA_COLUMNS}
    ),
    event_source as (
      select '${EVENT_TYPE.queued}' as type, q.customer_uuid, q.updated_at as created_at,
             q.id as request_id, null::bigint as callback_id, ${requestDataSql('q', 'null::jsonb')} as data,
             q.traceparent, q.x_request_id
      from queued q
    ),
    ${recordEventsSql('event_source', { origin: true })}
    select id, customer_uuid from queued`);
}
const ENQUEUE = enqueueStatement(false);
export const ENQUEUE_CAMPAIGN = enqueueStatement(true);

/**
 * Stores validated submits as `queued`, each with its underwriting.queued event, in statements of
 * ENQUEUE_BATCH rows (each batch commits on its own). The forwarder sends them, oldest first.
 * Nothing is sent here; a submit whose customer is in flight is answered null and not stored.
 */
export async function enqueueSubmits(
  db: Kysely<Tables>,
  submits: readonly QueuedSubmit[],
  options: EnqueueOptions,
): Promise<EnqueueResult[]> {
  const results: EnqueueResult[] = [];
  const hash = options.hashCpf ?? ((cpf: string) => hashCpf(cpf, options.cpfHashKey));
  for (let start = 0; start < submits.length; start += ENQUEUE_BATCH) {
    const size = Math.min(ENQUEUE_BATCH, submits.length - start);
    const columns = {
      customerUuid: new Array<string>(size),
      cpfHash: new Array<string>(size),
      cpfMasked: new Array<string>(size),
      costSavingEnabled: new Array<boolean>(size),
      srd: new Array<unknown>(size),
      idempotencyKey: new Array<string | null>(size),
      queuedBody: new Array<string>(size),
      traceparent: new Array<string | null>(size),
      xRequestId: new Array<string>(size),
    };
    for (let n = 0; n < size; n++) {
      const s = submits[start + n]!;
      const form = storedForm(s.body, options.cpfHashKey, hash);
      columns.customerUuid[n] = s.body.customerUuid;
      columns.cpfHash[n] = form.cpfHash;
      columns.cpfMasked[n] = form.cpfMasked;
      columns.costSavingEnabled[n] = s.body.costSavingEnabled;
      columns.srd[n] = form.srd ?? null;
      columns.idempotencyKey[n] = s.idempotencyKey ?? null;
      columns.queuedBody[n] = options.sealer.seal(JSON.stringify(s.body), s.body.customerUuid).toString('base64');
      columns.traceparent[n] = s.traceparent;
      columns.xRequestId[n] = s.xRequestId;
    }
    const withCampaign = options.campaignId !== undefined;
    const parameters: unknown[] = [
      columns.customerUuid, columns.cpfHash, columns.cpfMasked, columns.costSavingEnabled, columns.idempotencyKey,
      columns.queuedBody, columns.traceparent, columns.xRequestId, JSON.stringify(columns.srd), options.now.toISOString(),
    ];
    if (withCampaign) parameters.push(options.campaignId);
    const stored = await runStatement<{ id: number; customer_uuid: string }>(db, withCampaign ? ENQUEUE_CAMPAIGN : ENQUEUE, parameters);
    const idOf = new Map(stored.map((r) => [r.customer_uuid, Number(r.id)]));
    for (let n = 0; n < size; n++) {
      const customerUuid = columns.customerUuid[n]!;
      const id = idOf.get(customerUuid);
      // The first of a customer's submits in the batch is the one stored; the later ones are in flight.
      idOf.delete(customerUuid);
      results.push(id === undefined ? null : { id });
    }
  }
  return results;
}

/** A queued request the forwarder has claimed (now `submitting`, its sealed body out of the table). */
export interface ClaimedSubmit {
  id: number;
  customer_uuid: string;
  queued_body: Uint8Array | null;
  traceparent: string | null;
  x_request_id: string | null;
  forward_attempts: number;
}

/**
 * Claims the oldest queued request past `$2` (an id: 0 for the whole queue): `queued` →
 * `submitting`, submitted_at the claim's time, and its sealed body taken out of the table in the
 * same statement (returned, never left behind), so a request that may have reached the provider
 * never holds a CPF again. Rows others hold (a claim, an erasure) are skipped.
 *
 * Why the bound: every claimed request leaves its entry in underwriting_requests_queue until a
 * vacuum removes it (marked dead, still on its page), all of them before the first queued one. A
 * walk from the start steps over every request claimed since the last vacuum: 139 pages (1.2 ms)
 * after 50,000 claims, so a campaign's claims cost in proportion to the square of its size. The
 * forwarder starts each walk after its last claim and walks the whole queue only now and then
 * (forwarder.ts, FULL_WALK_MS).
 */
export const CLAIM_NEXT = defineStatement('claim_next_queued', `
    with next as (
      select id, queued_body from underwriting_requests
      where status = 'queued' and id > $2
      order by id
      limit 1
      for update skip locked
    )
    update underwriting_requests r
       set status = 'submitting', queued_body = null, submitted_at = $1, updated_at = $1
      from next
     where r.id = next.id
    returning r.id, r.customer_uuid, next.queued_body, r.traceparent, r.x_request_id, r.forward_attempts`);

/** Claims the oldest queued request whose id is above `after` (0: the oldest of all). */
export async function claimNextQueued(db: Kysely<Tables>, now: Date, after = 0): Promise<ClaimedSubmit | undefined> {
  const [row] = await runStatement<ClaimedSubmit>(db, CLAIM_NEXT, [now.toISOString(), after]);
  return row && { ...row, id: Number(row.id) };
}

/** True when a request is queued (the forwarder's idle check). */
export const ANY_QUEUED = defineStatement('any_queued', `select exists (select 1 from underwriting_requests where status = 'queued') as any`);

export async function anyQueued(db: Kysely<Tables>): Promise<boolean> {
  const [row] = await runStatement<{ any: boolean }>(db, ANY_QUEUED, []);
  return row?.any === true;
}

/**
 * A claimed request the provider certainly did not receive goes back to the queue, its body sealed
 * again, its place (its id) kept; the reason is kept in upstream_error until it is sent. Unless its
 * campaign was cancelled meanwhile: a cancel ends what is not yet forwarded, and this one was not,
 * so it ends `cancelled` (its body gone, its underwriting.cancelled event recorded) rather than
 * queued again to be sent after the cancel. The campaign's row is read `for share`: a cancel
 * committing meanwhile is waited for and seen, and one that comes after finds the request queued.
 */
const RETURN_TO_QUEUE = defineStatement('return_to_queue', `
    with campaign as (
      select c.status from campaigns c
       where c.id = (select campaign_id from underwriting_requests where id = $1)
       for share
    ),
    requeued as (
      update underwriting_requests
         set status = 'queued', queued_body = $2, submitted_at = queued_at, updated_at = $3,
             forward_attempts = forward_attempts + case when $6 then 1 else 0 end,
             upstream_status = case when $6 then $4 else upstream_status end,
             upstream_error = case when $6 then $5 else upstream_error end
       where id = $1 and status = 'submitting'
         and not exists (select 1 from campaign where status = 'cancelled')
      returning id
    ),
    cancelled as (
      update underwriting_requests r
         set status = 'cancelled', queued_body = null, submitted_at = queued_at, updated_at = $3,
             forward_attempts = forward_attempts + case when $6 then 1 else 0 end,
             upstream_status = case when $6 then $4 else upstream_status end,
             upstream_error = case when $6 then $5 else upstream_error end
       where r.id = $1 and r.status = 'submitting'
         and exists (select 1 from campaign where status = 'cancelled')
      returning ${REQUEST_DATA_COLUMNS}
    ),
    ${requestEventsSql(EVENT_TYPE.cancelled, 'cancelled')}
    select 'queued' as became from requeued
    union all
    select 'cancelled' from cancelled`);

/** What a return made of the request: queued again, cancelled (its campaign was), or nothing (it was no longer being sent). */
export type Returned = 'queued' | 'cancelled' | undefined;

export async function returnToQueue(
  db: Kysely<Tables>,
  id: number,
  sealed: Buffer,
  /** Why the send failed; null: it was never tried (its slot went stale), nothing to record. */
  reason: { upstreamStatus: number | null; error: string } | null,
  now: Date,
): Promise<Returned> {
  const rows = await runStatement<{ became: 'queued' | 'cancelled' }>(db, RETURN_TO_QUEUE, [
    id,
    sealed,
    now.toISOString(),
    reason?.upstreamStatus ?? null,
    reason?.error ?? null,
    reason !== null,
  ]);
  return rows[0]?.became;
}

/**
 * The provider accepted a forwarded request: `submitting` → `submitted` with its
 * underwriting.submitted event. A callback that overtook the reply has completed it already: left
 * alone, no event (its underwriting.completed says more).
 *
 * Committed without waiting for the disk: the request was sent either way, and a database crash
 * that took this write back leaves it `submitting`, which the expiry sweep ends as after a kill -9
 * mid-forward (submit_failed, possibly received; its callback completes it). Waited for, it was one
 * of the four flushes each forward queued ahead of every other commit (docs/provider-pacing.md).
 */
const MARK_FORWARDED = defineStatement('mark_forwarded', `
    with ${NOT_WAITED_TO_DISK},
    answered as (
      -- The provider's answer is kept whatever the request became meanwhile (as mark_submitted does):
      -- its callback may have completed it before this write. Only a request still being sent
      -- becomes submitted, with its event.
      update underwriting_requests
         set status = case when status = 'submitting' then 'submitted' else status end,
             upstream_status = $1,
             upstream_error = case when status = 'submitting' then null else upstream_error end,
             updated_at = $2
       where id = $3
      returning ${REQUEST_DATA_COLUMNS}
    ),
    forwarded as (select * from answered where status = 'submitted'),
    ${requestEventsSql(EVENT_TYPE.submitted, 'forwarded')},
    -- The answered call's slot back (provider/pacing.ts, Permit.handOver), in this statement rather
    -- than a return of its own.
    handed as (select $4::int as slot, $5::text as holder),
    ${answeredSlotsSql('handed')}
    select f.id from answered f, not_waited`);

/** Records the provider's acceptance of a forward, and frees the call's slot when it is handed over. */
export async function markForwarded(db: Kysely<Tables>, id: number, upstreamStatus: number, now: Date, slot?: { slot: number; holder: string }): Promise<void> {
  await runStatement(db, MARK_FORWARDED, [upstreamStatus, now.toISOString(), id, slot?.slot ?? null, slot?.holder ?? null]);
}
