import type { FastifyBaseLogger, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { Kysely } from 'kysely';
import { z } from 'zod';
import { allowlistGuard, secretMatches } from '../access/guards.js';
import type { CapabilityDeps } from '../app.js';
import { isStorageUnavailable } from '../db/database.js';
import type { DB } from '../db/types.js';
import { errorBody, unauthorized, validationFailed } from '../errors.js';
import { decide, toUtcInstant, underwritingResultSchema } from '../provider/schemas.js';
import { webhookTargets } from '../events/targets.js';
import { type Intake, readCallback } from './intake.js';
import { resultAnnouncer } from './announcer.js';
import { type CallbackMetrics, callbackMetrics } from './metrics.js';
import { type Arrival, type Recorded, recordInvalid } from './store.js';
import { type ResultWriter, resultWriter } from './writer.js';

const received = z.object({ received: z.literal(true) });
const errorSchema = z.object({ error: z.string(), message: z.string() });
const validationErrorSchema = errorSchema.extend({
  issues: z.array(z.object({ path: z.string(), message: z.string() })),
});
const querySchema = z.object({
  token: z.string().optional().describe('The callback secret, required when CALLBACK_SECRET is set'),
});

/** The body and query schemas document the route; the handler validates the raw bytes itself. */
const documentedOnly = () => (data: unknown) => ({ value: data });

export const callbackRoutes =
  (deps: CapabilityDeps): FastifyPluginAsyncZod =>
  async (app) => {
    const metrics = callbackMetrics(deps.registry);
    const db = deps.database.db;
    const writer = resultWriter(db, {
      onBatch: (size) => metrics.batch(size),
      recording: { skewS: deps.config.correlationSkewS, targets: webhookTargets(deps.config) },
    });
    const announcer = resultAnnouncer(deps.database.notifyDb, app.log);
    app.addHook('onClose', async () => {
      await writer.close();
      await announcer.close();
    });

    // Every body is read as bytes, whatever its content type (the provider's is not documented):
    // the exact bytes are stored, and parsing is ours to do after that.
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));

    app.post(
      '/v1/callbacks/underwriting',
      {
        onRequest: [allowlistGuard('callback', deps.config.callbackAllowedIps), tokenGuard(deps.config.callbackSecret)],
        preParsing: ignoreContentType,
        onResponse: countUnhandled(metrics),
        validatorCompiler: documentedOnly,
        schema: {
          tags: ['callbacks'],
          summary: "The provider's underwriting result; answered 2xx only once it is committed",
          querystring: querySchema,
          body: underwritingResultSchema,
          response: {
            200: received,
            400: validationErrorSchema,
            401: errorSchema,
            403: errorSchema,
            413: errorSchema,
            503: errorSchema,
          },
        },
      },
      async (request) => {
        const arrival: Arrival = {
          receivedAt: deps.clock(),
          peer: request.ip ?? null,
          rawBody: Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0),
        };
        const intake = readCallback(arrival.rawBody);
        if (!intake.valid) return refuseInvalid(db, arrival, intake, request.log, metrics);
        const recorded = await storeResult(db, writer, arrival, intake, request.log, metrics);
        metrics.count(recorded.outcome);
        if (recorded.outcome !== 'duplicate') announcer.announce(intake.result.customerUuid);
        if (recorded.outcome === 'matched') {
          metrics.turnaround((arrival.receivedAt.getTime() - recorded.submittedAt.getTime()) / 1000);
        }
        logStored(request.log, intake.result.customerUuid, recorded);
        return { received: true as const };
      },
    );
  };

/** When CALLBACK_SECRET is set, ?token= must carry it; checked before the body is read. */
function tokenGuard(secret: string | undefined): onRequestHookHandler {
  return function checkToken(request: FastifyRequest, reply: FastifyReply, done: () => void) {
    if (secret === undefined) return done();
    const token = (request.query as Record<string, unknown>).token;
    if (secretMatches(typeof token === 'string' ? token : undefined, [secret])) return done();
    // Never the token itself: the logged URL is redacted by the logger, and nothing else names it.
    request.log.warn({ group: 'callback', client: request.ip, presented: token !== undefined }, 'refused: wrong or missing callback token');
    void reply.code(401).send(errorBody(unauthorized('missing or wrong callback token')));
  };
}

/**
 * The content type is ignored: without it Fastify never refuses a malformed one (415), and the
 * catch-all parser reads every body as bytes.
 */
function ignoreContentType(request: FastifyRequest, _reply: FastifyReply, payload: unknown, done: (err: null, payload: never) => void) {
  delete request.raw.headers['content-type'];
  done(null, payload as never);
}

/** Outcomes decided outside the handler, by status. */
function countUnhandled(metrics: CallbackMetrics) {
  return function count(request: FastifyRequest, reply: FastifyReply, done: () => void) {
    const status = reply.statusCode;
    if (status === 401 || status === 403) metrics.count('refused');
    else if (status === 413) {
      metrics.count('too_large');
      request.log.warn({ client: request.ip }, 'callback refused: body too large, not stored');
    } else if (status === 503) metrics.count('unavailable');
    else if (status >= 500) metrics.count('failed');
    done();
  };
}

/** Stores a valid result; one PostgreSQL still refuses (a date out of its range) is kept as invalid. */
async function storeResult(
  db: Kysely<DB>,
  writer: ResultWriter,
  arrival: Arrival,
  intake: Extract<Intake, { valid: true }>,
  log: FastifyBaseLogger,
  metrics: CallbackMetrics,
): Promise<Recorded> {
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
    const issues = [{ path: '', message }];
    return refuseInvalid(db, arrival, { valid: false, issues, error: message, json: null, customerUuid: result.customerUuid }, log, metrics);
  }
}

function logStored(log: FastifyBaseLogger, customerUuid: string, recorded: Recorded): void {
  if (recorded.outcome === 'matched') {
    const { callbackId, requestId } = recorded;
    log.info({ customerUuid, callbackId, requestId, decision: recorded.decision }, 'callback matched');
  } else if (recorded.outcome === 'unmatched') {
    log.warn({ customerUuid, callbackId: recorded.callbackId }, 'callback stored unmatched: no request awaits it');
  } else {
    log.info({ customerUuid }, 'duplicate callback: already stored');
  }
}

/** Keeps an invalid callback (raw bytes and why), then answers 400. */
async function refuseInvalid(
  db: Kysely<DB>,
  arrival: Arrival,
  intake: Extract<Intake, { valid: false }>,
  log: FastifyBaseLogger,
  metrics: CallbackMetrics,
): Promise<never> {
  await keepInvalid(db, arrival, intake, log, metrics);
  throw validationFailed(intake.issues, 'the callback is not a valid underwriting result');
}

async function keepInvalid(
  db: Kysely<DB>,
  arrival: Arrival,
  intake: Extract<Intake, { valid: false }>,
  log: FastifyBaseLogger,
  metrics: CallbackMetrics,
): Promise<void> {
  const row = { ...arrival, error: intake.error, customerUuid: intake.customerUuid };
  let callbackId: number;
  try {
    callbackId = await recordInvalid(db, { ...row, body: intake.json });
  } catch (err) {
    if (!isUnstorableData(err)) throw err;
    // The jsonb copy is a convenience; the raw bytes are what must never be lost.
    callbackId = await recordInvalid(db, { ...row, body: null });
  }
  metrics.count('invalid');
  log.warn({ callbackId, customerUuid: intake.customerUuid, issues: intake.issues.map((i) => i.path) }, 'invalid callback kept');
}

/** PostgreSQL refused the values themselves (data exception, nesting too deep), not the connection. */
function isUnstorableData(err: unknown): boolean {
  if (isStorageUnavailable(err)) return false;
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (code.startsWith('22') || code === '54001');
}
