import { createHash, type Hash, randomBytes } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { z } from 'zod';
import type { CampaignSource, Tables } from '../db/types.js';
import { cpfHasher } from '../cpf.js';
import { FOREIGN_KEY_CHECKS_PLANNED_ONCE } from '../db/plan-guards.js';
import { isStorageUnavailable } from '../db/storage-errors.js';
import { AppError, type ValidationIssue, validationFailed } from '../http/errors.js';
import type { UnderwritingRequest } from '../provider/schemas.js';
import type { KeyDigester } from '../requests/key-digest.js';
import { ENQUEUE_BATCH, enqueueSubmits, type QueuedSubmit } from '../submissions/queue.js';
import type { Sealer } from '../submissions/seal.js';
import { BodyTooLargeError, csvRecords, type FileLine, ndjsonLines, type Source, UnreadableFileError } from './lines.js';
import { checkHeader, csvToBody, type FieldKinds, fieldKinds, issuesOf, lineIssue, parseJsonLine } from './records.js';
import {
  abandonUpload,
  claimCampaignKey,
  countBatch,
  dropUnqueuedCampaign,
  finishUpload,
  insertCampaign,
  lockForBatch,
  type RejectedLine,
  releaseCampaignKey,
  storedCampaignKeyOf,
  touchUpload,
} from './sql.js';
import type { CampaignMetrics } from './metrics.js';
import { UPLOAD_SILENT_MS } from './views.js';

// POST /v1/campaigns, the work: the file is read as it arrives, each line validated as a submit,
// the valid ones queued in batches (each batch its own transaction, so the forwarder starts on
// the first while the rest arrive), the invalid ones reported by line number.

/** The most lines a campaign may hold. */
export const MAX_LINES = 1_000_000;
/** The most bytes a campaign's body may hold: a million lines of up to ~1 KiB each. */
export const MAX_BODY_BYTES = 1024 * 1024 * 1024;
/** One line (one CSV record), in characters: a valid submit is far shorter. */
export const MAX_LINE_CHARS = 16 * 1024;
/**
 * Valid lines queued per batch (one statement, one transaction, one commit): a batch's fixed costs
 * (its round trips, its commit, the statement's start) spread over 4000 lines instead of 1000;
 * a batch holds a few MB while it is written. At most ENQUEUE_BATCH, or it would take two statements.
 */
export const BATCH_LINES = ENQUEUE_BATCH;
/**
 * Batches being written while the next is read. One: request ids follow the file's order (the
 * results' order). Batches of different uploads written at once cannot deadlock on customers they
 * share: each inserts its rows in one order (enqueueSubmits).
 */
export const BATCHES_IN_FLIGHT = 1;
/**
 * While its file arrives, an upload touches its campaign this often at most (besides each batch):
 * an upload with no sign of life for UPLOAD_SILENT_MS counts as dead (views.ts), and one sending a
 * line a second, well within the silence bound, takes over an hour to fill a batch.
 */
export const UPLOAD_HEARTBEAT_MS = 60_000;
/** Rejected lines kept and answered with their issues (all are counted). */
export const MAX_REJECTED_SHOWN = 1000;

/** The top-level fields a CSV header must name. */
const REQUIRED_COLUMNS = ['customerUuid', 'cpf', 'costSavingEnabled'] as const;

const IN_FLIGHT_ISSUE = lineIssue('customerUuid', 'this customerUuid already has a request queued or awaiting its callback (from another submit, or an earlier line of this file)');

export interface UploadDeps {
  db: Kysely<Tables>;
  clock: () => Date;
  /** The submit's body schema (submissions/schemas.ts: submitBodySchema), as the submit route uses it. */
  schema: z.ZodType<UnderwritingRequest>;
  cpfHashKey: string;
  /** What an Idempotency-Key is stored as (requests/key-digest.ts). */
  keyDigests: KeyDigester;
  sealer: Sealer;
  /** Told after each batch commits: this instance's forwarder looks at once. */
  wake?: () => void;
  /** Counts the lines read, by outcome (underwriting_campaign_lines_total). */
  metrics?: CampaignMetrics;
  limits?: { maxLines?: number; maxBodyBytes?: number; maxLineChars?: number; batchLines?: number };
}

export interface UploadRequest {
  source: CampaignSource;
  body: Source;
  /** key:… or peer:…; never a key. */
  createdBy: string;
  traceparent: string | null;
  log: FastifyBaseLogger;
  /** The Idempotency-Key header, validated (submissions/schemas.ts: idempotencyKeySchema); undefined without one. */
  idempotencyKey?: string | undefined;
}

export interface UploadAnswer {
  id: string;
  accepted: number;
  rejected: RejectedLine[];
  rejectedTotal: number;
  /** True when this is the answer of an earlier upload with the same Idempotency-Key and file, given again. */
  replayed?: boolean;
}

export const campaignIdOf = () => `cmp_${randomBytes(16).toString('hex')}`;

interface Pending {
  line: number;
  submit: QueuedSubmit;
}

export function campaignUploader(deps: UploadDeps) {
  const maxLines = deps.limits?.maxLines ?? MAX_LINES;
  const maxBytes = deps.limits?.maxBodyBytes ?? MAX_BODY_BYTES;
  const maxLineChars = deps.limits?.maxLineChars ?? MAX_LINE_CHARS;
  const batchLines = deps.limits?.batchLines ?? BATCH_LINES;
  const kinds: FieldKinds = fieldKinds(deps.schema as never);
  // Made once: the pads of CPF_HASH_KEY's HMAC, not an Hmac object per line.
  const hashCpf = cpfHasher(deps.cpfHashKey);

  return async function upload(request: UploadRequest): Promise<UploadAnswer> {
    if (request.idempotencyKey === undefined) return uploadOnce(request, undefined);
    const keyDigest = deps.keyDigests.digest(request.idempotencyKey);
    for (;;) {
      // The key as stored: the form a campaign holding it was stored with, else its digest (looked
      // for again each time round: the holder in an earlier form may be freed or rewritten meanwhile).
      const key = await storedCampaignKeyOf(deps.db, deps.keyDigests, request.idempotencyKey, deps.clock());
      const publicId = campaignIdOf();
      const claim = await claimCampaignKey(deps.db, { key, publicId, source: request.source, createdBy: request.createdBy, now: deps.clock(), insert: key === keyDigest });
      if ('claimed' in claim) return uploadOnce(request, { id: claim.claimed, publicId });
      const holder = claim.holder;
      if (holder === undefined) continue; // freed in between: take it again
      if (holder.uploaded_at === null) {
        if (holder.status === 'running' && holder.upload_error === null && deps.clock().getTime() - holder.updated_at.getTime() <= UPLOAD_SILENT_MS) {
          throw new AppError(409, 'in_flight', 'an upload with this Idempotency-Key is still being read; retry later');
        }
        // Its upload died with its instance (silent past UPLOAD_SILENT_MS, as views.ts judges it)
        // or failed without freeing the key: it is cancelled, and this upload takes the key over.
        const cancelled = await abandonUpload(deps.db, holder.id, 'its upload stopped; a retry with its Idempotency-Key took over', deps.clock());
        await releaseCampaignKey(deps.db, holder.id);
        request.log.warn({ campaign: holder.public_id, cancelled }, 'campaign upload taken over by a retry with its Idempotency-Key');
        continue;
      }
      // The key's campaign was uploaded whole: the same file gets its answer again, another file 422.
      const digest = await digestOf(request.body, maxBytes);
      if (holder.source !== request.source || holder.body_digest !== digest) {
        throw new AppError(422, 'idempotency_key_reused', 'this Idempotency-Key was used with a different file');
      }
      request.log.info({ campaign: holder.public_id }, 'campaign upload replayed (same Idempotency-Key and file)');
      return { id: holder.public_id, accepted: holder.accepted, rejected: holder.rejected_lines, rejectedTotal: holder.rejected, replayed: true };
    }
  };

  /** One upload: into a new campaign, or (keyed) into the campaign its key's claim inserted. */
  async function uploadOnce(request: UploadRequest, keyed: { id: number; publicId: string } | undefined): Promise<UploadAnswer> {
    const publicId = keyed?.publicId ?? campaignIdOf();
    let campaignId: number | undefined = keyed?.id;
    const digest = keyed ? createHash('sha256') : undefined;
    let accepted = 0;
    let rejectedTotal = 0;
    const rejected: RejectedLine[] = [];
    const reject = (line: number, issues: ValidationIssue[]) => {
      rejectedTotal++;
      deps.metrics?.lines('rejected', 1);
      rejected.push({ line, issues });
      // Lines in flight are known only once their batch is written, after later lines were
      // rejected: the first MAX_REJECTED_SHOWN by number are kept, in at most twice that.
      if (rejected.length >= 2 * MAX_REJECTED_SHOWN) firstRejected();
    };
    const firstRejected = () => {
      rejected.sort((a, b) => a.line - b.line);
      rejected.length = Math.min(rejected.length, MAX_REJECTED_SHOWN);
    };

    const campaign = async (): Promise<number> =>
      (campaignId ??= await insertCampaign(deps.db, { publicId, source: request.source, createdBy: request.createdBy, now: deps.clock() }));

    /** Queues one batch in one transaction; lines whose customer is in flight are rejected. */
    const flush = async (batch: Pending[], rejectedBefore: number): Promise<void> => {
      const id = await campaign();
      const now = deps.clock();
      const submits = batch.map((p) => p.submit);
      const queued = await deps.db.transaction().execute(async (trx) => {
        if ((await lockForBatch(trx, id)).cancelled) throw new AppError(409, 'campaign_cancelled', `campaign ${publicId} was cancelled during its upload; the rest of the file was not read`);
        await FOREIGN_KEY_CHECKS_PLANNED_ONCE.execute(trx);
        const stored = await enqueueSubmits(trx, submits, { now, cpfHashKey: deps.cpfHashKey, hashCpf, sealer: deps.sealer, campaignId: id });
        let n = 0;
        stored.forEach((r, i) => {
          if (r === null) reject(batch[i]!.line, [IN_FLIGHT_ISSUE]);
          else n++;
        });
        // Counted in the batch's own transaction (one commit per batch): the campaign row is this
        // upload's alone while it runs (one batch at a time), and a cancel waits for the batch anyway.
        await countBatch(trx, id, { accepted: n, rejected: rejectedBefore + batch.length - n, now });
        return n;
      });
      deps.wake?.();
      accepted += queued;
      deps.metrics?.lines('accepted', queued);
    };

    let batch: Pending[] = [];
    /** Lines rejected since the last batch: counted in with the next one. */
    let rejectedSince = 0;
    /** The batch being written while the next one is read (BATCHES_IN_FLIGHT). */
    const writing = new Set<Promise<void>>();
    let failure: unknown;
    const startFlush = async () => {
      while (writing.size >= BATCHES_IN_FLIGHT) await Promise.race(writing);
      if (failure !== undefined) throw failure;
      const full = batch;
      const rejectedCount = rejectedSince;
      batch = [];
      rejectedSince = 0;
      const write: Promise<void> = flush(full, rejectedCount).then(
        () => void writing.delete(write),
        (err: unknown) => {
          failure ??= err;
          writing.delete(write);
        },
      );
      writing.add(write);
    };
    const allWritten = async () => {
      await Promise.all(writing);
      if (failure !== undefined) throw failure;
    };
    /** customerUuids of the batch being read: a second line of one is in flight already (the first). */
    let inBatch = new Set<string>();

    const take = (line: number, value: unknown) => {
      const parsed = deps.schema.safeParse(value);
      if (!parsed.success) {
        rejectedSince++;
        return reject(line, issuesOf(parsed.error));
      }
      const body = parsed.data;
      if (inBatch.has(body.customerUuid)) {
        rejectedSince++;
        return reject(line, [IN_FLIGHT_ISSUE]);
      }
      inBatch.add(body.customerUuid);
      batch.push({ line, submit: { body, xRequestId: `${publicId}:${line}`, traceparent: request.traceparent } });
    };

    let lastBeat = deps.clock().getTime();
    /** The heartbeat, as chunks are read: the campaign's row (once made) touched, unless a batch being written will. */
    const beat = async () => {
      const now = deps.clock();
      if (campaignId === undefined || writing.size > 0 || now.getTime() - lastBeat < UPLOAD_HEARTBEAT_MS) return;
      lastBeat = now.getTime();
      await touchUpload(deps.db, campaignId, now);
    };

    try {
      const limits = { maxBytes, maxLineChars };
      const body = beating(digest ? digesting(request.body, digest) : request.body, beat);
      const reader = request.source === 'csv' ? csvRecords(body, limits) : ndjsonLines(body, limits);
      let columns: string[] | undefined;
      /** Lines before the first that counts: a CSV's header row. */
      let headerLines = 0;
      for await (const chunk of reader) {
        for (const fileLine of chunk) {
          if (request.source === 'csv' && columns === undefined) {
            columns = header(fileLine, kinds);
            headerLines = fileLine.line;
            continue;
          }
          // Lines as an editor numbers them, blank ones included (they are read too).
          if (fileLine.line - headerLines > maxLines) {
            throw new AppError(413, 'payload_too_large', `the file holds more than ${maxLines} lines (line ${fileLine.line}): split it into several campaigns`);
          }
          if (fileLine.problem !== undefined) {
            rejectedSince++;
            reject(fileLine.line, [lineIssue('', fileLine.problem)]);
            continue;
          }
          const read = fileLine.fields !== undefined ? csvToBody(columns!, fileLine.fields, kinds) : parseJsonLine(fileLine.text);
          if ('issues' in read) {
            rejectedSince++;
            reject(fileLine.line, read.issues);
            continue;
          }
          take(fileLine.line, read.value);
          if (batch.length >= batchLines) {
            await startFlush();
            inBatch = new Set();
          }
        }
      }
      if (request.source === 'csv' && columns === undefined) throw validationFailed([lineIssue('header', 'the file is empty: a CSV campaign starts with a header row')], 'the CSV has no header row');
      if (batch.length > 0) await startFlush();
      await allWritten();
      const id = await campaign();
      firstRejected();
      await finishUpload(deps.db, id, { accepted, rejected: rejectedTotal, rejectedLines: rejected, now: deps.clock(), bodyDigest: digest?.digest('hex') ?? null });
      request.log.info({ campaign: publicId, accepted, rejected: rejectedTotal }, 'campaign uploaded');
      return { id: publicId, accepted, rejected, rejectedTotal };
    } catch (err) {
      await Promise.all(writing);
      throw await failed(err);
    }

    /** The upload stops: what it queued is cancelled (nothing of a failed upload is sent unless already forwarded). */
    async function failed(err: unknown): Promise<unknown> {
      const answer = asAnswer(err);
      if (campaignId !== undefined) {
        const reason = answer instanceof AppError ? answer.message : stoppedBecause(err);
        try {
          // A refused file (its header, its size) stores nothing, with a key as without one.
          if (keyed && (await dropUnqueuedCampaign(deps.db, campaignId))) {
            request.log.info({ campaign: publicId, reason }, 'campaign upload failed before queueing anything: no campaign kept');
            return answer;
          }
          const cancelled = await abandonUpload(deps.db, campaignId, reason, deps.clock());
          // No answer was given for the key: a retry with it uploads the file anew (as a submit's key is freed).
          if (keyed) await releaseCampaignKey(deps.db, campaignId);
          request.log.warn({ campaign: publicId, cancelled, reason }, 'campaign upload failed: what it queued is cancelled');
        } catch (cancelErr) {
          request.log.error({ campaign: publicId, err: { message: (cancelErr as Error).message } }, 'campaign upload failed, and what it queued could not be cancelled');
        }
      }
      return answer;
    }
  }
}

/** The body passed on chunk by chunk, each also added to the digest. */
async function* digesting(body: Source, digest: Hash): AsyncGenerator<Buffer | string> {
  for await (const chunk of body) {
    digest.update(typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk);
    yield chunk;
  }
}

/** The body passed on chunk by chunk, the upload's heartbeat given a chance before each. */
async function* beating(body: Source, beat: () => Promise<void>): AsyncGenerator<Buffer | string> {
  for await (const chunk of body) {
    await beat();
    yield chunk;
  }
}

/** SHA-256 (hex) of a whole body, read and not kept; past maxBytes, 413 as an upload's. */
async function digestOf(body: Source, maxBytes: number): Promise<string> {
  const digest = createHash('sha256');
  let bytes = 0;
  for await (const chunk of digesting(body, digest)) {
    bytes += typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.length;
    if (bytes > maxBytes) throw asAnswer(new BodyTooLargeError(maxBytes));
  }
  return digest.digest('hex');
}

/** The CSV header's columns (trimmed), or a 400 naming what is wrong with it. */
function header(first: FileLine, kinds: FieldKinds): string[] {
  if (first.fields === undefined) throw validationFailed([lineIssue('header', first.problem ?? 'unreadable')], 'the CSV header row cannot be read');
  const columns = first.fields.map((c) => c.trim());
  const issues = checkHeader(columns, kinds, REQUIRED_COLUMNS);
  if (issues.length > 0) throw validationFailed(issues, 'the CSV header row does not name the submit\'s fields');
  return columns;
}

/** Why an upload stopped on an error that is no answer of its own, as its campaign's uploadError says it. */
function stoppedBecause(err: unknown): string {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'ECONNRESET' || code === 'ERR_STREAM_PREMATURE_CLOSE') return 'the client closed the connection before the end of the file';
  if (isStorageUnavailable(err)) return 'the database could not be reached';
  return 'the upload stopped on an error of ours';
}

/** Reading errors as the contract's answers; others (storage, a client gone) pass as they are. */
function asAnswer(err: unknown): unknown {
  if (err instanceof BodyTooLargeError) return new AppError(413, 'payload_too_large', `the body is larger than ${err.maxBytes} bytes: split the file into several campaigns`);
  if (err instanceof UnreadableFileError) return validationFailed([lineIssue(`line.${err.line}`, err.message)], 'the file cannot be read past this line');
  return err;
}
