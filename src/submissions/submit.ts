import { setTimeout as delay } from 'node:timers/promises';
import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { Clock } from '../deps.js';
import type { Tables } from '../db/types.js';
import { StorageUnavailableError } from '../db/storage-errors.js';
import { AppError, errorBody } from '../http/errors.js';
import { TokenUnavailableError } from '../provider/errors.js';
import { acquireFresh, type PaceRefusal, type Pacer, type SlotHandOver } from '../provider/pacing.js';
import type { UnderwritingRequest } from '../provider/schemas.js';
import type { UnderwritingClient } from '../provider/underwriting-client.js';
import { type SpanParent, storedTraceparent } from '../tracing/spans.js';
import {
  bodyHash,
  claimKey,
  purgeExpiredKeys,
  recordAnswer,
  releaseKey,
  requestOfKey,
  type StoredAnswer,
  storedAnswer,
  storedKeyOf,
} from '../requests/idempotency.js';
import type { KeyDigester } from '../requests/key-digest.js';
import { circuitOutcome, describeFailure, holdOf } from './failure.js';
import type { SubmitMetricOutcome } from './metrics.js';
import { enqueueSubmits } from './queue.js';
import type { Sealer } from './seal.js';
import { storedForm } from './stored-form.js';
import type { SubmitWrites } from './writes.js';
import {
  abandonedAfterMs,
  markSubmitFailed,
  type NewSubmission,
  NOT_SENT_SLOW_STORE,
  releaseAbandoned,
  releaseUnsentOfKey,
  SEND_WINDOW_MS,
} from '../requests/sql.js';

export interface SubmitDeps {
  db: Kysely<Tables>;
  client: Pick<UnderwritingClient, 'submitUnderwriting'>;
  clock: Clock;
  cpfHashKey: string;
  /** What an Idempotency-Key is stored as (requests/key-digest.ts). */
  keyDigests: KeyDigester;
  /** Scrubbed from anything the provider says before it is stored. */
  partnerToken: string | undefined;
  upstreamTimeoutMs: number;
  /** The provider's pace, shared by every instance: a synchronous submit waits for a slot within its send window. */
  pacer: Pacer;
  /** Queued submits (Prefer: respond-async): sealed with this, then the forwarder is woken. */
  queue: { sealer: Sealer; wake: () => void };
  /** Told the customer of a failed submit once it (and its event) is committed. */
  announce?: (customerUuid: string) => void;
  /** The synchronous submit's insert and acceptance, group-committed. */
  writes: SubmitWrites;
}

/** sync: the provider is called now (the default); async: the request is queued for the forwarder (Prefer: respond-async). */
export type SubmitMode = 'sync' | 'async';

/** Where a submit comes from: carried to the provider, stored for the callback and the events. */
export interface SubmitOrigin {
  /** The request's X-Request-Id (given or generated). */
  requestId: string;
  /** The submit's server span (tracing on). */
  trace: SpanParent | undefined;
}

export interface SubmitAnswer extends StoredAnswer {
  metricOutcome: SubmitMetricOutcome;
  replayed: boolean;
  /** Sent as Retry-After: the provider is not being called for this long (pacing, Retry-After, open circuit). */
  retryAfterS?: number;
}

const IDEMPOTENCY_POLL_MS = [20, 50, 100, 200] as const;
/** How often one instance sweeps expired keys away (a courtesy, not a rule). */
const PURGE_EVERY_MS = 60_000;

const inFlight = (message = 'this customerUuid already has a request awaiting its callback') =>
  new AppError(409, 'in_flight', message);

/** Runs one submit, through its Idempotency-Key when one is given. Storage failures are thrown (503). */
export function submitter(deps: SubmitDeps) {
  let lastPurge = 0;

  /** Later requests with a key wait this long for the first one's answer (it may be on another instance). */
  const waitMs = deps.upstreamTimeoutMs + 5_000;
  /** A pending key older than this belongs to an attempt that died; a retry may take it over. */
  const leaseMs = abandonedAfterMs(deps.upstreamTimeoutMs);

  async function withKey(body: UnderwritingRequest, sentKey: string, log: FastifyBaseLogger, origin: SubmitOrigin, mode: SubmitMode): Promise<SubmitAnswer> {
    // The forms the key may be stored in (requests/key-digest.ts): its digest now first, then its
    // digests under earlier CPF_HASH_KEYs, then as sent. A request is stored under the first; the
    // key's row is used in the form an earlier attempt stored it in (storedKeyOf), and only ever
    // made anew as the digest now.
    const forms = deps.keyDigests.candidates(sentKey);
    const digest = forms[0]!;
    let key = await storedKeyOf(deps.db, deps.keyDigests, sentKey, deps.clock());
    const hash = bodyHash(body);
    const deadline = Date.now() + waitMs;
    let takenOver = false;
    for (let round = 0; ; round++) {
      const claim = await claimKey(deps.db, { key, hash, now: deps.clock(), leaseMs, insert: key === digest });
      if (claim.claimed) {
        takenOver = claim.takenOver;
        break;
      }
      const { row } = claim;
      if (row === undefined) {
        // Released, purged or expired in between, or (an earlier form) rewritten as its digest by
        // the pass at start: look for it again, then take it.
        key = await storedKeyOf(deps.db, deps.keyDigests, sentKey, deps.clock());
        continue;
      }
      if (row.body_hash !== hash) {
        const reused = new AppError(422, 'idempotency_key_reused', 'this Idempotency-Key was used with a different request body');
        return { statusCode: 422, body: errorBody(reused), metricOutcome: 'idempotency_key_reused', replayed: false };
      }
      const stored = storedAnswer(row);
      if (stored) return { ...stored, metricOutcome: 'idempotent_replay', replayed: true };
      if (Date.now() >= deadline) {
        const busy = inFlight('a request with this Idempotency-Key is still being processed; retry later');
        return { statusCode: 409, body: errorBody(busy), metricOutcome: 'in_flight', replayed: false };
      }
      if (round === 0) log.debug('waiting for the first request with this Idempotency-Key');
      await delay(IDEMPOTENCY_POLL_MS[Math.min(round, IDEMPOTENCY_POLL_MS.length - 1)]);
    }

    await purgeNowAndThen(log);
    let attempt: { answer: SubmitAnswer; requestId: number | null };
    // An attempt that died after storing its request may have reached the provider: answer from
    // what it stored rather than call the provider a second time for one key. (If that cannot be
    // read now, the key stays pending, for a later retry to take over again.)
    const earlier = takenOver ? await requestOfKey(deps.db, forms, deps.clock()) : undefined;
    try {
      attempt = earlier ? { answer: answerOf(earlier), requestId: earlier.id } : await once(body, forms, log, origin, mode);
    } catch (err) {
      // No final answer, and nothing sent (storage failed before the call): free the key so that a
      // retry runs the request. So a key that is free again was never sent under, by anyone.
      // Tried twice: after a database blink the first may draw a pooled connection that died with
      // it; the pool then closes every connection opened before that one at its checkout (the
      // epoch, db/guarded-pool.ts), so the second runs on a new one. A key not freed waits for its
      // lease to pass.
      await releaseKey(deps.db, key)
        .catch(() => releaseKey(deps.db, key))
        .catch((releaseErr: unknown) =>
          log.warn({ err: { message: (releaseErr as Error).message } }, 'could not free the Idempotency-Key of a failed submit: it waits for its lease'),
        );
      throw err;
    }
    try {
      await recordAnswer(deps.db, key, attempt.requestId, attempt.answer);
    } catch (err) {
      log.error({ err: { message: (err as Error).message } }, 'could not record the answer of an Idempotency-Key');
    }
    return attempt.answer;
  }

  async function purgeNowAndThen(log: FastifyBaseLogger): Promise<void> {
    if (Date.now() - lastPurge < PURGE_EVERY_MS) return;
    lastPurge = Date.now();
    await purgeExpiredKeys(deps.db, deps.clock()).catch((err: Error) =>
      log.warn({ err: { message: err.message } }, 'could not purge expired idempotency keys'),
    );
  }

  type Attempt = { answer: SubmitAnswer; requestId: number | null };
  const inFlightAttempt = (): Attempt => ({
    answer: { statusCode: 409, body: errorBody(inFlight()), metricOutcome: 'in_flight', replayed: false },
    requestId: null,
  });

  /** `keys`: the Idempotency-Key's forms (KeyDigester.candidates); the request is stored under the first, its digest now. */
  function once(body: UnderwritingRequest, keys: readonly string[] | undefined, log: FastifyBaseLogger, origin: SubmitOrigin, mode: SubmitMode): Promise<Attempt> {
    return mode === 'async' ? enqueue(body, keys, log, origin) : callNow(body, keys, log, origin);
  }

  /** Stores the request as `queued` (with its event) and answers at once; the forwarder sends it when the pace allows. */
  async function enqueue(body: UnderwritingRequest, keys: readonly string[] | undefined, log: FastifyBaseLogger, origin: SubmitOrigin): Promise<Attempt> {
    const submit = { body, idempotencyKey: keys?.[0], xRequestId: origin.requestId, traceparent: storedTraceparent(origin.trace) };
    const store = async () => (await enqueueSubmits(deps.db, [submit], { now: deps.clock(), cpfHashKey: deps.cpfHashKey, sealer: deps.queue.sealer }))[0];
    let stored = await store();
    // The request in flight may be one nobody will finish (see releaseBlocking): then it no longer holds the customer.
    if (stored === null && (await releaseBlocking(body.customerUuid, keys, log))) stored = await store();
    if (!stored) return inFlightAttempt();
    deps.queue.wake();
    log.info({ customerUuid: body.customerUuid }, 'queued: the request will be forwarded when the provider\'s pace allows');
    const queued = { customerUuid: body.customerUuid, status: 'queued' as const, submittedAt: null };
    return { answer: { statusCode: 202, body: queued, metricOutcome: 'queued', replayed: false }, requestId: stored.id };
  }

  /** Store first, then call the provider, then record what happened without ever moving a row back. */
  async function callNow(body: UnderwritingRequest, keys: readonly string[] | undefined, log: FastifyBaseLogger, origin: SubmitOrigin): Promise<Attempt> {
    const began = performance.now();
    const { trace } = origin;
    const submission: NewSubmission = {
      customerUuid: body.customerUuid,
      ...storedForm(body, deps.cpfHashKey),
      costSavingEnabled: body.costSavingEnabled,
      idempotencyKey: keys?.[0],
      now: deps.clock(),
      traceparent: storedTraceparent(trace),
      xRequestId: origin.requestId,
    };
    let stored = await deps.writes.store(submission, trace);
    // The request in flight may be one nobody will finish (see releaseBlocking): then it no longer holds the customer.
    if (stored === null && (await releaseBlocking(body.customerUuid, keys, log))) stored = await deps.writes.store({ ...submission, now: deps.clock() }, trace);
    if (stored === null) return inFlightAttempt();
    const sendBy = began + SEND_WINDOW_MS;
    if (performance.now() > sendBy) {
      // Sending this late could outlive the abandoned bound, after which the customer is released.
      await markSubmitFailed(deps.db, stored.id, { upstreamStatus: null, error: NOT_SENT_SLOW_STORE }, deps.clock(), trace).catch(() => {});
      throw new StorageUnavailableError('storing the request took too long; nothing was sent');
    }

    let paced;
    try {
      paced = await acquireFresh(deps.pacer, { deadline: sendBy, priority: 'sync' });
    } catch (err) {
      await markSubmitFailed(deps.db, stored.id, { upstreamStatus: null, error: NOT_SENT_NO_SLOT }, deps.clock(), trace).catch(() => {});
      throw err;
    }
    if ('refused' in paced) return notPaced(paced.refused, body.customerUuid, stored.id, log, trace);
    const { permit } = paced;

    let upstreamStatus: number;
    let slot: SlotHandOver | undefined;
    try {
      ({ status: upstreamStatus } = await deps.client.submitUnderwriting(body, { sendBy, requestId: origin.requestId, trace }));
      // Given back with the acceptance, in its commit; a probe's answer goes back on its own.
      slot = permit.handOver();
      if (!slot) void permit.release('answered');
    } catch (err) {
      // Awaited: the next submit must see this failure (the circuit, the provider's Retry-After).
      await permit.release(err instanceof TokenUnavailableError ? 'not_called' : circuitOutcome(err), holdOf(err));
      const failure = describeFailure(err, [body.cpf, deps.partnerToken]);
      // The hint (what the operator should check) comes once per token failure streak, never a secret.
      const hint = err instanceof TokenUnavailableError ? err.hint : undefined;
      log.warn({ customerUuid: body.customerUuid, upstreamStatus: failure.stored.upstreamStatus, code: failure.error.code, hint }, 'submit failed upstream');
      await markSubmitFailed(deps.db, stored.id, failure.stored, deps.clock(), trace).then(
        (marked) => {
          if (marked) deps.announce?.(body.customerUuid);
        },
        (dbErr: Error) => log.error({ customerUuid: body.customerUuid, err: { message: dbErr.message } }, 'could not record a failed submit'),
      );
      const answer = { statusCode: failure.error.statusCode, body: errorBody(failure.error), metricOutcome: failure.metricOutcome, replayed: false };
      return { answer, requestId: stored.id };
    }

    try {
      await deps.writes.accept({ id: stored.id, upstreamStatus, now: deps.clock(), slot }, trace);
      slot?.settled(true);
    } catch (err) {
      slot?.settled(false);
      // The provider has it; saying 503 ("nothing sent") would be false. The callback still matches the row.
      log.error({ customerUuid: body.customerUuid, err: { message: (err as Error).message } }, 'provider accepted a submit that could not be recorded');
    }
    log.info({ customerUuid: body.customerUuid, upstreamStatus }, 'submitted: the provider accepted the request');
    // The contract's 202 says "submitted": the provider has it. GET tells the stored state
    // (completed already, when the callback overtook this reply).
    const accepted = {
      customerUuid: body.customerUuid,
      status: 'submitted' as const,
      submittedAt: stored.submittedAt.toISOString(),
      upstreamStatus,
    };
    return { answer: { statusCode: 202, body: accepted, metricOutcome: 'submitted', replayed: false }, requestId: stored.id };
  }

  /** A synchronous submit that got no slot in its send window: stored as submit_failed (nothing sent), answered 504 with Retry-After. */
  async function notPaced(refusal: PaceRefusal, customerUuid: string, id: number, log: FastifyBaseLogger, trace: SpanParent | undefined): Promise<Attempt> {
    const why = REFUSAL_WORDS[refusal.reason];
    await markSubmitFailed(deps.db, id, { upstreamStatus: null, error: `not sent: ${why}` }, deps.clock(), trace).then(
      (marked) => {
        if (marked) deps.announce?.(customerUuid);
      },
      (dbErr: Error) => log.error({ customerUuid, err: { message: dbErr.message } }, 'could not record a submit the pace refused'),
    );
    log.warn({ customerUuid, reason: refusal.reason, retryAfterS: refusal.retryAfterS }, 'submit not sent: no provider slot in its send window');
    const error = new AppError(504, 'upstream_unavailable', `the provider is not being called now (${why}); nothing was sent`);
    const answer = { statusCode: 504, body: errorBody(error), metricOutcome: 'paced' as const, replayed: false, retryAfterS: refusal.retryAfterS };
    return { answer, requestId: id };
  }

  /**
   * Ends the customer's request in flight when nobody will finish it, so that a new submit may go
   * on: one of this very Idempotency-Key still `submitting` was left by an attempt that answered 503
   * although its row was committed (the key was free again, so nothing was ever sent under it);
   * any other past the abandoned bound (abandonedAfterMs). True when one was ended.
   */
  async function releaseBlocking(customerUuid: string, keys: readonly string[] | undefined, log: FastifyBaseLogger): Promise<boolean> {
    const now = deps.clock();
    const ended: number[] = [];
    if (keys !== undefined) ended.push(...(await releaseUnsentOfKey(deps.db, { customerUuid, keys, now })).map((r) => r.id));
    if (ended.length === 0) ended.push(...(await releaseAbandoned(deps.db, { now, afterMs: leaseMs, customerUuid })).map((r) => r.id));
    if (ended.length > 0) {
      deps.announce?.(customerUuid);
      log.warn({ customerUuid, released: ended }, 'released a request no submit will finish: stored as submit_failed');
    }
    return ended.length > 0;
  }

  return (body: UnderwritingRequest, key: string | undefined, log: FastifyBaseLogger, origin: SubmitOrigin, mode: SubmitMode = 'sync'): Promise<SubmitAnswer> =>
    key === undefined ? once(body, undefined, log, origin, mode).then((a) => a.answer) : withKey(body, key, log, origin, mode);
}

/** What the stored request says of a synchronous submit the pace refused, and the 504's message. */
const REFUSAL_WORDS: Record<PaceRefusal['reason'], string> = {
  held: "the provider asked us to wait (Retry-After)",
  open: 'the provider has been failing; the circuit is open until a probe succeeds',
  rate: 'PROVIDER_MAX_RPS calls per second are taken',
  in_flight: 'PROVIDER_MAX_IN_FLIGHT calls are in flight',
  closing: 'the instance is shutting down',
};

/** What a request stored but never sent, for want of a provider slot (the database failed), says in upstream_error. */
const NOT_SENT_NO_SLOT = 'not sent: no provider slot could be taken (the database failed)';

/** The answer an abandoned attempt would have given, rebuilt from the request it stored. */
function answerOf(row: NonNullable<Awaited<ReturnType<typeof requestOfKey>>>): SubmitAnswer {
  // A queued submit's answer was 202 queued, whatever became of it since (GET tells).
  if (row.queued_at !== null) {
    return { statusCode: 202, body: { customerUuid: row.customer_uuid, status: 'queued', submittedAt: null }, metricOutcome: 'idempotent_replay', replayed: true };
  }
  const status = row.upstream_status;
  if (status !== null && status >= 200 && status < 300) {
    const body = { customerUuid: row.customer_uuid, status: 'submitted', submittedAt: row.submitted_at.toISOString(), upstreamStatus: status };
    return { statusCode: 202, body, metricOutcome: 'idempotent_replay', replayed: true };
  }
  if (status !== null) {
    const error = new AppError(502, 'upstream_rejected', `the provider refused the request (HTTP ${status})`, { upstreamStatus: status });
    return { statusCode: 502, body: errorBody(error), metricOutcome: 'idempotent_replay', replayed: true };
  }
  // Unknown at the provider (the attempt died mid-call) or unreachable: never risk a second call.
  const error = new AppError(
    504,
    'upstream_unavailable',
    'an earlier attempt with this Idempotency-Key stopped before the provider answered; its callback may still arrive',
  );
  return { statusCode: 504, body: errorBody(error), metricOutcome: 'idempotent_replay', replayed: true };
}
