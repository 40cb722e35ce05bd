import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { allowlistGuard, callbackTokenGuard } from '../access/guards.js';
import type { Config } from '../config/config.js';
import { errorSchema, validationErrorSchema } from '../http/errors.js';
import { operation } from '../http/openapi.js';
import { lateTraceOf } from '../tracing/server-spans.js';
import { underwritingResultSchema } from '../provider/schemas.js';
import type { CallbackMetrics } from './metrics.js';
import type { CallbackService } from './service.js';

const received = z.object({ received: z.literal(true) });
const querySchema = z.object({
  token: z.string().optional().describe('The callback secret, required when CALLBACK_SECRET is set'),
});

/** The body and query schemas document the route; the handler validates the raw bytes itself. */
const documentedOnly = () => (data: unknown) => ({ value: data });

export const callbackRoutes =
  (config: Pick<Config, 'callbackAllowedIps' | 'callbackSecret'>, callbacks: CallbackService): FastifyPluginAsyncZod =>
  async (app) => {
    const { receiver, metrics } = callbacks;
    const closing = new AbortController();
    let bodyPass: { settled: () => Promise<void> } | undefined;
    app.addHook('onReady', async () => {
      bodyPass = callbacks.maskEarlierBodies(app.log, closing.signal);
    });
    app.addHook('preClose', (done) => {
      closing.abort();
      done();
    });
    app.addHook('onClose', async () => {
      // The pass stops between batches once closing aborts; its statement in flight ends first.
      await bodyPass?.settled();
      await receiver.close();
    });

    // Every body is read as bytes, whatever its content type (the provider's is not documented):
    // the bytes are stored (every CPF in them masked: kept-body.ts), and parsing is ours to do after that.
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));

    app.post(
      '/v1/callbacks/underwriting',
      {
        onRequest: [allowlistGuard('callback', config.callbackAllowedIps), callbackTokenGuard(config.callbackSecret)],
        preParsing: ignoreContentType,
        onResponse: countUnhandled(metrics),
        validatorCompiler: documentedOnly,
        // Without an incoming traceparent, the server span begins as the child of the submit the callback completes.
        config: { lateServerSpan: true },
        schema: {
          ...operation('receiveUnderwritingCallback', 'callback'),
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
        const rawBody = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
        const leave = callbacks.ingest.enter();
        try {
          const arrival = { receivedAt: callbacks.clock(), peer: request.ip ?? null, rawBody, requestId: request.id, trace: lateTraceOf(request) };
          await receiver.receive(arrival, request.log);
        } finally {
          leave();
        }
        return { received: true as const };
      },
    );
  };

/**
 * The content type is ignored: without it Fastify never refuses a malformed one (415), and the
 * catch-all parser reads every body as bytes.
 */
function ignoreContentType(request: FastifyRequest, _reply: FastifyReply, payload: unknown, done: (err: null, payload: never) => void) {
  // Fastify reads an undefined content type as none; `delete` would turn the headers object into a
  // slower dictionary for every later read of it.
  request.raw.headers['content-type'] = undefined;
  done(null, payload as never);
}

/** Counts the answers decided outside the handler, by status. */
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
