import http from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { isStorageUnavailable } from '../db/storage-errors.js';
import { loggedRequestUrl } from '../observability/logger.js';
import { scrubText } from '../observability/scrub.js';
import { isLongUpload } from './long-upload.js';

/** An error the client is meant to see: a stable code, an HTTP status, a human message. */
export class AppError extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: string,
    message: string,
    /** Extra fields of the error body, e.g. upstreamStatus. */
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'AppError';
  }
}

export const forbidden = () => new AppError(403, 'forbidden', 'this address may not use this route');
export const unauthorized = (message = 'missing or wrong credentials') =>
  new AppError(401, 'unauthorized', message);
export const notFound = (message: string) => new AppError(404, 'not_found', message);
export const storageUnavailable = () =>
  new AppError(503, 'storage_unavailable', 'the database is unavailable; try again shortly');

export interface ValidationIssue {
  path: string;
  message: string;
}

export function validationFailed(issues: ValidationIssue[], message = 'the request is not valid'): AppError {
  // An issue's path may be a field the client named, its message may quote what it sent: no CPF-like run goes back.
  const shown = issues.map((i) => ({ path: scrubText(i.path), message: scrubText(i.message) }));
  return new AppError(400, 'validation_failed', message, { issues: shown });
}

/** zod issue paths as the contract shows them: "srd.grossIncome", "items.0.x". */
export function issuePath(path: readonly PropertyKey[]): string {
  return path.map(String).join('.');
}

/** An HTTP status code (the provider's answer to a submit, say). */
export const httpStatusSchema = z.number().int().min(100).max(599);

/** The contract's error body, for routes' response schemas. */
export const errorSchema = z.object({ error: z.string(), message: z.string() }).meta({ id: 'ErrorBody' });
/** A 400 validation_failed body: the error body and where the request went wrong. */
export const validationErrorSchema = errorSchema
  .extend({ issues: z.array(z.object({ path: z.string(), message: z.string() })) })
  .meta({ id: 'ValidationErrorBody' });
/**
 * What a route behind guardRoutes answers besides its own statuses: an invalid request (400), the
 * key's 401, the allowlist's 403, the database's 503.
 */
export const guardedRouteErrors = { 400: validationErrorSchema, 401: errorSchema, 403: errorSchema, 503: errorSchema };

/** The error body every route answers with: {error, message, ...extra}. */
export function errorBody(err: AppError): Record<string, unknown> {
  return { error: err.code, message: err.message, ...err.extra };
}

/**
 * One place that turns any thrown error into the contract's error shape. Never shows a 5xx's detail.
 * secrets (configuredSecrets) are never echoed: a 404 names the path as the logs show it.
 */
export function installErrorHandler(app: FastifyInstance, secrets: readonly string[] = []): void {
  app.setNotFoundHandler((request, reply) => {
    // The path as logged (loggedRequestUrl): a CPF or a secret typed into a URL, in any encoding, is not echoed back.
    const path = loggedRequestUrl(request.url.split(/[?#]/, 1)[0] ?? '', secrets);
    void reply.code(404).send({ error: 'not_found', message: `no route ${request.method} ${path}` });
  });

  app.setErrorHandler((error: FastifyError | AppError | Error, request, reply) => {
    if (error instanceof AppError) {
      if (error.statusCode >= 500) request.log.warn({ code: error.code }, error.message);
      return reply.code(error.statusCode).send(errorBody(error));
    }
    if (hasZodFastifySchemaValidationErrors(error)) {
      const context = (error as FastifyError).validationContext;
      const issues = error.validation.flatMap((v) => {
        const path = v.instancePath.split('/').filter(Boolean);
        const keys = (v.params as { keys?: unknown }).keys;
        // An unknown field is reported at its own path ("srd.extra"), not at its parent's.
        if (v.keyword === 'unrecognized_keys' && Array.isArray(keys)) {
          return keys.map((k) => ({ path: [...path, String(k)].join('.'), message: 'unknown field' }));
        }
        return [{ path: path.join('.'), message: v.message ?? 'invalid' }];
      });
      const messages: Record<string, string> = {
        body: 'the request body is not valid',
        querystring: 'the query string is not valid',
        headers: 'the request headers are not valid',
        params: 'the path parameters are not valid',
      };
      const message = messages[context ?? ''] ?? 'the request is not valid';
      return reply.code(400).send(errorBody(validationFailed(issues, message)));
    }
    if (isStorageUnavailable(error)) {
      request.log.error({ err: error }, 'database unavailable');
      return reply.code(503).send(errorBody(storageUnavailable()));
    }
    const fe = error as FastifyError;
    if (fe.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
      return reply.code(413).send({ error: 'payload_too_large', message: 'the request body is too large' });
    }
    if (fe.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
      const given = request.headers['content-type']?.split(';')[0]?.trim();
      // Named as a log would name it: a CPF or a secret typed into the header is not echoed back.
      const what = given ? `content-type ${scrubText(given.slice(0, 100), secrets)} is not accepted` : 'a body needs a content-type';
      // A route that reads other types names them (its schema's consumes: the campaigns' files).
      const consumes = (request.routeOptions.schema as { consumes?: readonly string[] } | undefined)?.consumes;
      const how = consumes?.length ? `send the file as ${consumes.join(' or ')}, in UTF-8` : 'send the body as application/json';
      return reply.code(415).send({ error: 'unsupported_media_type', message: `${what}: ${how}` });
    }
    if (fe.statusCode === 400) {
      // Fastify's own client errors (bad JSON, empty body): say what, not how.
      return reply.code(400).send(errorBody(validationFailed([], fe.message)));
    }
    if (fe.statusCode !== undefined && fe.statusCode > 400 && fe.statusCode < 500) {
      return reply.code(fe.statusCode).send({ error: 'bad_request', message: fe.message });
    }
    if (isClientAbort(error, request)) {
      // The client closed its connection mid-body (a streamed upload it gave up on): its own failure,
      // answered (to nobody) as a client error, never logged as ours.
      request.log.info({ err: { message: error.message, code: (error as NodeJS.ErrnoException).code } }, 'client aborted its request');
      return reply.code(400).send(errorBody(validationFailed([], 'the request was cut off before its end')));
    }
    request.log.error({ err: error }, 'unhandled error');
    return reply.code(500).send({ error: 'internal_error', message: 'something went wrong on our side' });
  });
}

/**
 * Node's error for a request whose connection closed before its body ended (FIN or RST mid-body),
 * as a route that reads the body as a stream (a campaign's file) meets it. Not the database's: those
 * are recognised first (isStorageUnavailable).
 */
function isClientAbort(error: Error, request: FastifyRequest): boolean {
  const code = (error as NodeJS.ErrnoException).code;
  // The error itself must be the abort: another error met while the upload is cleaned up after the
  // client left is still ours, and logged as such.
  return !request.raw.complete && ((code === 'ECONNRESET' && error.message === 'aborted') || code === 'ERR_STREAM_PREMATURE_CLOSE');
}

/** Fastify's own refusals before routing (a path parameter too long, a malformed URL), in the contract's body. */
export function frameworkErrorReply(error: FastifyError, _request: FastifyRequest, reply: FastifyReply): void {
  if (error.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    void reply.code(414).send({ error: 'uri_too_long', message: 'the URL is too long' });
  } else if (error.code === 'FST_ERR_BAD_URL') {
    void reply.code(400).send(errorBody(validationFailed([], 'the URL is not valid')));
  } else {
    void reply.code(500).send({ error: 'internal_error', message: 'something went wrong on our side' });
  }
}

const CLIENT_ERRORS: Record<string, { status: number; error: string; message: string }> = {
  ERR_HTTP_REQUEST_TIMEOUT: { status: 408, error: 'request_timeout', message: 'the request was not received in time' },
  HPE_HEADER_OVERFLOW: { status: 431, error: 'headers_too_large', message: 'the request line or headers are too large' },
};

/**
 * Node's refusals of a connection's bytes (a timed-out slow client, oversized headers or URL,
 * garbage), answered in the contract's body and then closed, as Fastify's default does.
 */
export function answerClientError(this: FastifyInstance, err: Error & { code?: string }, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  // A campaign's upload is bounded by its silence instead (http/long-upload.ts); Node reports each request once.
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT' && isLongUpload(socket)) return;
  const known = CLIENT_ERRORS[err.code ?? ''];
  // Anything else Node refuses (a malformed request line or header) is a 400 like Fastify's own: validation_failed.
  const { status, error, message } = known ?? { status: 400, error: 'validation_failed', message: 'the request could not be read' };
  this.log.debug({ code: err.code, status }, 'client error: connection closed');
  if (socket.writable) {
    const body = JSON.stringify(status === 400 ? { error, message, issues: [] } : { error, message });
    socket.write(
      `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nConnection: close\r\nContent-Length: ${Buffer.byteLength(body)}\r\nContent-Type: application/json\r\n\r\n${body}`,
    );
  }
  socket.destroy(err);
}
