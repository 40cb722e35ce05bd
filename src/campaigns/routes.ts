import { Readable } from 'node:stream';
import type { FastifyRequest, FastifySchemaCompiler } from 'fastify';
import { type FastifyPluginAsyncZod, validatorCompiler } from 'fastify-type-provider-zod';
import { allowlistGuard, apiKeyGuard, presentedBearer } from '../access/guards.js';
import { type Actor, keyFingerprint } from '../audit/trail.js';
import type { CampaignSource } from '../db/types.js';
import type { Config } from '../config/config.js';
import { AppError } from '../http/errors.js';
import { allowLongUpload, bodyUntilSilent } from '../http/long-upload.js';
import { operation } from '../http/openapi.js';
import { storedTraceparent } from '../tracing/spans.js';
import { traceOf } from '../tracing/server-spans.js';
import {
  campaignBody,
  campaignParams,
  cancelResponses,
  listQuery,
  listResponses,
  readResponses,
  resultsQuery,
  resultsResponses,
  uploadHeaders,
  uploadResponses,
} from './schemas.js';
import type { CampaignService } from './service.js';
import { MAX_BODY_BYTES } from './upload.js';

/** Content codings an answer may name back (RFC 9110's registry and common aliases). */
const KNOWN_CODINGS = new Set(['gzip', 'x-gzip', 'deflate', 'br', 'compress', 'x-compress', 'zstd', 'aes128gcm', 'exi', 'pack200-gzip']);

/** A campaign's upload that sends no byte for this long is cut off (it may take longer than the request timeout as a whole). */
export const UPLOAD_IDLE_MS = 30_000;

const silent = (idleMs: number) => () =>
  new AppError(408, 'request_timeout', `no byte of the body for ${Math.round(idleMs / 1000)} s: the upload stopped`);

/**
 * Whether an Accept header prefers NDJSON to CSV (the default) by its q-values; CSV wins a tie,
 * and the wildcards (any type, any text type) count for CSV.
 */
export function prefersNdjson(accept: string | undefined): boolean {
  const q = new Map<string, number>();
  for (const range of (accept ?? '').split(',')) {
    const [type = '', ...params] = range.split(';').map((p) => p.trim().toLowerCase());
    const qParam = params.find((p) => p.startsWith('q='));
    const value = qParam === undefined ? 1 : Number(qParam.slice(2));
    if (Number.isFinite(value)) q.set(type, Math.max(q.get(type) ?? -1, value));
  }
  // The most specific range that names a type decides its q (RFC 9110 12.5.1).
  const of = (type: string, group: string) => q.get(type) ?? q.get(group) ?? q.get('*/*') ?? -1;
  const ndjson = of('application/x-ndjson', 'application/*');
  return ndjson > 0 && ndjson > of('text/csv', 'text/*');
}

const MEDIA_TYPES: Record<string, CampaignSource> = { 'application/x-ndjson': 'ndjson', 'text/csv': 'csv' };

/** The body is documented by its schema and read by the handler as a stream: never validated (or held) whole. */
const streamedBody: FastifySchemaCompiler<unknown> = (route) =>
  route.httpPart === 'body' ? (stream: unknown) => ({ value: stream }) : validatorCompiler(route as Parameters<typeof validatorCompiler>[0]);

/** POST /v1/campaigns and the campaign reads: the submit allowlist, and QUERY_API_KEYS when set. */
export const campaignRoutes =
  (config: Pick<Config, 'submitAllowedIps' | 'queryApiKeys'>, campaigns: CampaignService, uploadIdleMs = UPLOAD_IDLE_MS): FastifyPluginAsyncZod =>
  async (app) => {
    const actorOf = (request: FastifyRequest): Actor =>
      config.queryApiKeys.length > 0 ? keyFingerprint(presentedBearer(request) ?? '') : `peer:${request.ip}`;

    app.addHook('onRequest', allowlistGuard('submit', config.submitAllowedIps));
    app.addHook('onRequest', apiKeyGuard(config.queryApiKeys));

    // The file passes through as the request's stream: read line by line by the uploader, never whole.
    app.addContentTypeParser(Object.keys(MEDIA_TYPES), (_request, payload, done) => done(null, payload));

    app.post(
      '/v1/campaigns',
      {
        schema: {
          ...operation('createCampaign', 'query'),
          tags: ['campaigns'],
          summary: 'Upload a file of submits (NDJSON or CSV): each valid line is queued, each invalid one reported by number',
          description:
            'The file is read as it arrives and each line validated exactly as POST /v1/underwritings validates its body. ' +
            'Valid lines are stored as queued submits (in batches, as they are read) and forwarded at the provider\'s pace. ' +
            'A line whose customer already has a request queued or awaiting its callback (or appears earlier in the file) is rejected. ' +
            'If the upload fails part-way (too large, cut off, cancelled), what it had queued is cancelled.',
          consumes: Object.keys(MEDIA_TYPES),
          headers: uploadHeaders,
          body: campaignBody,
          response: uploadResponses,
        },
        validatorCompiler: streamedBody,
        // Before the body's parser runs: a file labelled application/json (a client's default) met the
        // app's JSON parser, 400 'not valid JSON' or 413 past its 64 KiB, instead of this route's 415.
        preParsing: async (request) => {
          const [type = '', ...params] = (request.headers['content-type'] ?? '').split(';').map((p) => p.trim().toLowerCase());
          const charset = params.find((p) => p.startsWith('charset='))?.slice(8).replace(/"/g, '');
          if (!(type in MEDIA_TYPES) || (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8')) {
            throw new AppError(415, 'unsupported_media_type', 'send the file as application/x-ndjson or text/csv, in UTF-8');
          }
          // A compressed file would be read as text, each line "not valid JSON": refused whole instead.
          const encoding = (request.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
          if (encoding !== 'identity') {
            // Named only when it is a known coding: the header is the client's text (a CPF, a key), never echoed.
            const named = KNOWN_CODINGS.has(encoding) ? `content-encoding ${encoding}` : 'this content-encoding';
            throw new AppError(415, 'unsupported_media_type', `${named} is not read: send the file uncompressed`);
          }
          // So would one in a transfer coding besides chunked (Transfer-Encoding: gzip, chunked), which Node passes on as it came.
          const transfer = (request.headers['transfer-encoding'] ?? '')
            .split(',')
            .map((c) => c.trim().toLowerCase())
            .filter((c) => c !== '' && c !== 'chunked' && c !== 'identity');
          if (transfer.length > 0) {
            const named = transfer.every((c) => KNOWN_CODINGS.has(c)) ? `transfer-encoding ${transfer.join(', ')}` : 'this transfer-encoding';
            throw new AppError(415, 'unsupported_media_type', `${named} is not read: send the file uncompressed`);
          }
          const length = Number(request.headers['content-length']);
          if (Number.isFinite(length) && length > MAX_BODY_BYTES) {
            throw new AppError(413, 'payload_too_large', `the body is larger than ${MAX_BODY_BYTES} bytes: split the file into several campaigns`);
          }
        },
        preValidation: async (request) => {
          allowLongUpload(request, uploadIdleMs, silent(uploadIdleMs));
        },
      },
      async (request, reply) => {
        const type = (request.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
        try {
          const answer = await campaigns.upload({
            source: MEDIA_TYPES[type]!,
            body: bodyUntilSilent(request, request.body as unknown as AsyncIterable<Buffer>),
            createdBy: actorOf(request),
            traceparent: storedTraceparent(traceOf(request)),
            log: request.log,
            idempotencyKey: request.headers['idempotency-key'],
          });
          if (answer.replayed) void reply.header('idempotent-replayed', 'true');
          const { replayed: _, ...body } = answer;
          return reply.code(202).send(body);
        } catch (err) {
          // The rest of the body is not read: the connection closes after the answer.
          if (!request.raw.complete) void reply.header('connection', 'close');
          throw err;
        }
      },
    );

    app.get(
      '/v1/campaigns',
      {
        schema: {
          ...operation('listCampaigns', 'query'),
          tags: ['campaigns'],
          summary: 'Campaigns, newest first, paged by cursor',
          querystring: listQuery,
          response: listResponses,
        },
      },
      async (request) => {
        const { limit, cursor } = request.query;
        return campaigns.list(limit, cursor);
      },
    );

    app.get(
      '/v1/campaigns/:id',
      {
        schema: {
          ...operation('getCampaign', 'query'),
          tags: ['campaigns'],
          summary: "A campaign's progress: its requests by status and decision, the rate they are forwarded at, the estimated time left",
          params: campaignParams,
          response: readResponses,
        },
      },
      async (request) => campaigns.read(request.params.id),
    );

    app.get(
      '/v1/campaigns/:id/results',
      {
        schema: {
          ...operation('getCampaignResults', 'query'),
          tags: ['campaigns'],
          summary: "A campaign's outcomes, streamed in file order: CSV (default) or NDJSON (Accept: application/x-ndjson)",
          description: 'Read page by page as it is sent. Only masked CPFs. A request erased since (LGPD) is no longer listed.',
          params: campaignParams,
          querystring: resultsQuery,
          response: resultsResponses,
        },
      },
      async (request, reply) => {
        const ndjson = request.query.format === 'ndjson' || (request.query.format === undefined && prefersNdjson(request.headers.accept));
        const { name, file } = await campaigns.results(request.params.id, ndjson);
        return reply
          .type(ndjson ? 'application/x-ndjson; charset=utf-8' : 'text/csv; charset=utf-8')
          .header('content-disposition', `attachment; filename="${name}"`)
          .header('cache-control', 'no-store')
          // A HEAD gets the headers alone: Fastify drains a stream it does not send, which read every
          // page of the results from the database, as fast as it could, for nobody.
          .send((request.method === 'HEAD' ? Readable.from([]) : Readable.from(file, { objectMode: false })) as never);
      },
    );

    app.post(
      '/v1/campaigns/:id/cancel',
      {
        schema: {
          ...operation('cancelCampaign', 'query'),
          tags: ['campaigns'],
          summary: 'Cancel a campaign: every request of it still queued ends cancelled (never sent); those already forwarded go on',
          params: campaignParams,
          response: cancelResponses,
        },
      },
      async (request, reply) => {
        const done = await campaigns.cancel(request.params.id);
        request.log.info({ campaign: request.params.id, cancelled: done.cancelled }, 'campaign cancelled');
        return reply.code(202).send({ id: request.params.id, status: 'cancelled' as const, cancelled: done.cancelled });
      },
    );
  };
