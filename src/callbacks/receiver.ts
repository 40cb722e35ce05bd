import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import { isStorageUnavailable } from '../db/storage-errors.js';
import type { Tables } from '../db/types.js';
import { validationFailed } from '../http/errors.js';
import { decide, toUtcInstant } from '../provider/schemas.js';
import { type Intake, readCallback } from './intake.js';
import { keptBody } from './kept-body.js';
import type { CallbackMetrics } from './metrics.js';
import type { Arrival, RecordOptions, Recorded } from '../requests/complete.js';
import { recordInvalid } from './sql.js';
import { customerAttribute, joinStoredTrace } from '../tracing/spans.js';
import { resultWriter } from './writer.js';

type Invalid = Extract<Intake, { valid: false }>;
type Valid = Extract<Intake, { valid: true }>;

export interface ReceiverDeps {
  db: Kysely<Tables>;
  metrics: CallbackMetrics;
  /** Told the customer of every newly stored result (not of a duplicate), after its commit. */
  announce(customerUuid: string): void;
  /** Correlation skew and where the results' events are pushed. */
  recording: RecordOptions;
  /** CUSTOMER_UUID_ALLOW_CPF (callbacks/intake.ts). */
  customerUuidAllowCpf: boolean;
  /** The keyed hashes (under every CPF_HASH_KEY) a CPF masked in a callback's bytes is kept as. */
  cpfHash(cpf: string): string | readonly string[];
}

export interface CallbackReceiver {
  /** Stores one callback's bytes; resolves once committed, throws a 400 for an invalid one (kept too). */
  receive(arrival: Arrival, log: FastifyBaseLogger): Promise<void>;
  /** Resolves when every queued result has been written. */
  close(): Promise<void>;
}

/** Receives callbacks: a valid result through the group-commit writer, anything else kept as invalid. */
export function callbackReceiver(deps: ReceiverDeps): CallbackReceiver {
  const { db, metrics } = deps;
  const writer = resultWriter(db, { onBatch: (size) => metrics.batch(size), recording: deps.recording });

  /** A result PostgreSQL still refuses (a date out of its range) comes back as an invalid intake. */
  async function storeValid(arrival: Arrival, intake: Valid): Promise<Recorded | Invalid> {
    const { result } = intake;
    try {
      return await writer.record({
        ...arrival,
        customerUuid: result.customerUuid,
        started: toUtcInstant(result.started),
        finished: toUtcInstant(result.finished),
        body: intake.json,
        decision: decide(result.response),
      });
    } catch (err) {
      if (!isUnstorableData(err)) throw err;
      const message = `cannot be stored: ${(err as Error).message}`;
      return { valid: false, issues: [{ path: '', message }], error: message, json: null, customerUuid: result.customerUuid };
    }
  }

  /** Keeps the raw bytes and why; the jsonb copy is a convenience dropped when PostgreSQL refuses it. */
  async function keepInvalid(arrival: Arrival, intake: Invalid, log: FastifyBaseLogger): Promise<void> {
    const row = { ...arrival, error: intake.error, customerUuid: intake.customerUuid };
    let callbackId: number;
    try {
      callbackId = await recordInvalid(db, { ...row, body: intake.json });
    } catch (err) {
      if (!isUnstorableData(err)) throw err;
      callbackId = await recordInvalid(db, { ...row, body: null });
    }
    metrics.count('invalid');
    log.warn({ callbackId, customerUuid: intake.customerUuid, issues: intake.issues.map((i) => i.path) }, 'invalid callback kept');
  }

  function stored(arrival: Arrival, customerUuid: string, recorded: Recorded, log: FastifyBaseLogger): void {
    metrics.count(recorded.disposition);
    if (recorded.disposition !== 'duplicate') deps.announce(customerUuid);
    if (recorded.disposition === 'matched') {
      metrics.turnaround((arrival.receivedAt.getTime() - recorded.submittedAt.getTime()) / 1000);
      const { callbackId, requestId } = recorded;
      // The callback's span (its own trace, or the provider's) and the submit's trace point at each other.
      if (arrival.trace) {
        joinStoredTrace(arrival.trace, recorded.submitTraceparent, 'underwriting.callback', arrival.receivedAt, customerAttribute(customerUuid));
      }
      log.info({ customerUuid, callbackId, requestId, decision: recorded.decision }, 'callback matched');
    } else if (recorded.disposition === 'unmatched') {
      log.warn({ customerUuid, callbackId: recorded.callbackId }, 'callback stored unmatched: no request awaits it');
    } else {
      log.info({ customerUuid }, 'duplicate callback: already stored');
    }
  }

  return {
    async receive(received, log) {
      // Read as received; stored with every CPF in the bytes masked, and their hashes.
      const kept = keptBody(received.rawBody);
      const intake = readCallback(received.rawBody, { customerUuidAllowCpf: deps.customerUuidAllowCpf }, kept.text);
      const arrival: Arrival = { ...received, rawBody: kept.bytes, cpfHashes: kept.cpfs.flatMap((cpf) => deps.cpfHash(cpf)) };
      const storedOrInvalid = intake.valid ? await storeValid(arrival, intake) : intake;
      if ('valid' in storedOrInvalid) {
        await keepInvalid(arrival, storedOrInvalid, log);
        throw validationFailed(storedOrInvalid.issues, 'the callback is not a valid underwriting result');
      }
      stored(arrival, (intake as Valid).result.customerUuid, storedOrInvalid, log);
    },
    close: () => writer.close(),
  };
}

/** PostgreSQL refused the values themselves (data exception, nesting too deep), not the connection. */
function isUnstorableData(err: unknown): boolean {
  if (isStorageUnavailable(err)) return false;
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (code.startsWith('22') || code === '54001');
}
