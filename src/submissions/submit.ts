import { setTimeout as delay } from 'node:timers/promises';
import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { Clock } from '../deps.js';
import type { Tables } from '../db/types.js';
import { StorageUnavailableError } from '../db/database.js';
import { AppError, errorBody } from '../errors.js';
import { TokenUnavailableError, UpstreamRejectedError, UpstreamUnavailableError } from '../provider/errors.js';
import type { UnderwritingRequest } from '../provider/schemas.js';
import { EXCERPT_MAX_CHARS, type UnderwritingClient } from '../provider/underwriting-client.js';
import { scrubText } from '../scrub.js';
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
} from '../requests/idempotency.js';
import type { SubmitMetricOutcome } from './metrics.js';
import { storedForm } from './stored-form.js';
import {
  abandonedAfterMs,
  insertSubmitting,
  isInFlightConflict,
  markSubmitFailed,
  markSubmitted,
  type NewSubmission,
  NOT_SENT_SLOW_STORE,
  releaseAbandoned,
  releaseUnsentOfKey,
  SEND_WINDOW_MS,
} from '../requests/store.js';

export interface SubmitDeps {
  db: Kysely<Tables>;
  client: Pick<UnderwritingClient, 'submitUnderwriting'>;
  clock: Clock;
  cpfHashKey: string;
  /** Scrubbed from anything the provider says before it is stored. */
  partnerToken: string | undefined;
  upstreamTimeoutMs: number;
  /** Told the customer of a failed submit once it (and its event) is committed. */
  announce?: (customerUuid: string) => void;
}

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

  async function withKey(body: UnderwritingRequest, key: string, log: FastifyBaseLogger, origin: SubmitOrigin): Promise<SubmitAnswer> {
    const hash = bodyHash(body);
    const deadline = Date.now() + waitMs;
    let takenOver = false;
    for (let round = 0; ; round++) {
      const claim = await claimKey(deps.db, { key, hash, now: deps.clock(), leaseMs });
      if (claim.claimed) {
        takenOver = claim.takenOver;
        break;
      }
      const { row } = claim;
      if (row === undefined) continue; // released or purged in between: try to take it again
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
    const earlier = takenOver ? await requestOfKey(deps.db, key, deps.clock()) : undefined;
    try {
      attempt = earlier ? { answer: answerOf(earlier), requestId: earlier.id } : await once(body, key, log, origin);
    } catch (err) {
      // No final answer, and nothing sent (storage failed before the call): free the key so that a
      // retry runs the request. So a key that is free again was never sent under, by anyone.
      await releaseKey(deps.db, key).catch(() => {});
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

  /** Store first, then call the provider, then record what happened without ever moving a row back. */
  async function once(
    body: UnderwritingRequest,
    key: string | undefined,
    log: FastifyBaseLogger,
    origin: SubmitOrigin,
  ): Promise<{ answer: SubmitAnswer; requestId: number | null }> {
    const began = performance.now();
    const { trace } = origin;
    const submission: NewSubmission = {
      customerUuid: body.customerUuid,
      ...storedForm(body, deps.cpfHashKey),
      costSavingEnabled: body.costSavingEnabled,
      idempotencyKey: key,
      now: deps.clock(),
      traceparent: storedTraceparent(trace),
      xRequestId: origin.requestId,
    };
    let stored: { id: number; submittedAt: Date };
    try {
      stored = await insertSubmitting(deps.db, submission, trace);
    } catch (err) {
      if (!isInFlightConflict(err)) throw err;
      const inFlightAnswer = { answer: { statusCode: 409, body: errorBody(inFlight()), metricOutcome: 'in_flight' as const, replayed: false }, requestId: null };
      // The request in flight may be one nobody will finish (see releaseBlocking): then it no longer holds the customer.
      if (!(await releaseBlocking(body.customerUuid, key, log))) return inFlightAnswer;
      try {
        stored = await insertSubmitting(deps.db, { ...submission, now: deps.clock() }, trace);
      } catch (again) {
        if (!isInFlightConflict(again)) throw again;
        return inFlightAnswer;
      }
    }
    const sendBy = began + SEND_WINDOW_MS;
    if (performance.now() > sendBy) {
      // Sending this late could outlive the abandoned bound, after which the customer is released.
      await markSubmitFailed(deps.db, stored.id, { upstreamStatus: null, error: NOT_SENT_SLOW_STORE }, deps.clock(), trace).catch(() => {});
      throw new StorageUnavailableError('storing the request took too long; nothing was sent');
    }

    let upstreamStatus: number;
    try {
      ({ status: upstreamStatus } = await deps.client.submitUnderwriting(body, { sendBy, requestId: origin.requestId, trace }));
    } catch (err) {
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
      await markSubmitted(deps.db, stored.id, upstreamStatus, deps.clock(), trace);
    } catch (err) {
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

  /**
   * Ends the customer's request in flight when nobody will finish it, so that a new submit may go
   * on: one of this very Idempotency-Key still `submitting` was left by an attempt that answered 503
   * although its row was committed (the key was free again, so nothing was ever sent under it);
   * any other past the abandoned bound (abandonedAfterMs). True when one was ended.
   */
  async function releaseBlocking(customerUuid: string, key: string | undefined, log: FastifyBaseLogger): Promise<boolean> {
    const now = deps.clock();
    const ended: number[] = [];
    if (key !== undefined) ended.push(...(await releaseUnsentOfKey(deps.db, { customerUuid, key, now })).map((r) => r.id));
    if (ended.length === 0) ended.push(...(await releaseAbandoned(deps.db, { now, afterMs: leaseMs, customerUuid })).map((r) => r.id));
    if (ended.length > 0) {
      deps.announce?.(customerUuid);
      log.warn({ customerUuid, released: ended }, 'released a request no submit will finish: stored as submit_failed');
    }
    return ended.length > 0;
  }

  return (body: UnderwritingRequest, key: string | undefined, log: FastifyBaseLogger, origin: SubmitOrigin): Promise<SubmitAnswer> =>
    key === undefined ? once(body, undefined, log, origin).then((a) => a.answer) : withKey(body, key, log, origin);
}

/** The answer an abandoned attempt would have given, rebuilt from the request it stored. */
function answerOf(row: NonNullable<Awaited<ReturnType<typeof requestOfKey>>>): SubmitAnswer {
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

interface Failure {
  error: AppError;
  metricOutcome: SubmitMetricOutcome;
  stored: { upstreamStatus: number | null; error: string };
}

/** Maps a failed provider call to the contract's answer and to what the stored request says. */
function describeFailure(err: unknown, secrets: Array<string | undefined>): Failure {
  if (err instanceof TokenUnavailableError) {
    return {
      error: new AppError(502, 'upstream_auth_failed', 'no bearer token could be obtained for the provider; nothing was sent'),
      metricOutcome: 'auth_failed',
      stored: { upstreamStatus: null, error: redact(`bearer token unavailable: ${err.message}`, secrets) },
    };
  }
  if (err instanceof UpstreamRejectedError) {
    const { upstreamStatus } = err;
    return {
      error: new AppError(502, 'upstream_rejected', `the provider refused the request (HTTP ${upstreamStatus})`, { upstreamStatus }),
      metricOutcome: 'rejected',
      stored: { upstreamStatus, error: redact(err.bodyExcerpt, secrets) || `provider answered ${upstreamStatus} with no body` },
    };
  }
  const reason = err instanceof UpstreamUnavailableError ? err.message : 'the provider call failed unexpectedly';
  return {
    error: new AppError(504, 'upstream_unavailable', 'the provider could not be reached or did not answer in time'),
    metricOutcome: 'unavailable',
    stored: { upstreamStatus: null, error: redact(reason, secrets) },
  };
}

/** Keeps CPFs (in any separator form or escape) and our own secrets out of what we store from the provider's words. */
function redact(text: string, secrets: Array<string | undefined>): string {
  return scrubText(text, secrets, EXCERPT_MAX_CHARS);
}
