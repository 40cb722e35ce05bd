import { type Attributes, defaultTextMapGetter, ROOT_CONTEXT, type Span, SpanKind, SpanStatusCode, type Tracer, trace } from '@opentelemetry/api';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { loggedRequestUrl } from '../observability/logger.js';
import { scrubText } from '../observability/scrub.js';
import { propagator, type SpanParent, startSpan } from './spans.js';

const SPAN = Symbol('serverSpan');
const PARENT = Symbol('spanParent');
type Traced = FastifyRequest & { [SPAN]: Span | null; [PARENT]: SpanParent | null };

/** The request's server span as a parent for what the request does; undefined when tracing is off. */
export function traceOf(request: FastifyRequest): SpanParent | undefined {
  return (request as Traced)[PARENT] ?? undefined;
}

/**
 * A server span for every request, on every route (404s and refusals included): it continues an
 * incoming traceparent (and tracestate), is named by the route's template, and carries no query
 * value, no header but the request id, and no CPF-like digits of the path.
 */
export function traceRequests(app: FastifyInstance, tracer: Tracer): void {
  app.decorateRequest(SPAN, null);
  app.decorateRequest(PARENT, null);
  app.addHook('onRequest', (request, _reply, done) => {
    const incoming = propagator.extract(ROOT_CONTEXT, request.headers, defaultTextMapGetter);
    const route = request.routeOptions.url;
    const span = startSpan(tracer, route === undefined ? request.method : `${request.method} ${route}`, SpanKind.SERVER, incoming, () => {
      const shown = loggedRequestUrl(request.url);
      const mark = shown.indexOf('?');
      const attributes: Attributes = {
        'http.request.method': request.method,
        'url.path': mark === -1 ? shown : shown.slice(0, mark),
        'client.address': request.ip,
        'http.request.header.x-request-id': [mayHoldCpf(request.id) ? scrubText(request.id) : request.id],
      };
      if (mark !== -1) attributes['url.query'] = shown.slice(mark + 1);
      if (route !== undefined) attributes['http.route'] = route;
      return attributes;
    });
    (request as Traced)[SPAN] = span;
    (request as Traced)[PARENT] = { tracer, context: trace.setSpan(incoming, span) };
    done();
  });
  app.addHook('onResponse', (request, reply, done) => {
    const span = (request as Traced)[SPAN];
    if (span) {
      span.setAttribute('http.response.status_code', reply.statusCode);
      if (reply.statusCode >= 500) {
        span.setAttribute('error.type', String(reply.statusCode));
        span.setStatus({ code: SpanStatusCode.ERROR });
      }
      span.end();
      (request as Traced)[SPAN] = null;
    }
    done();
  });
  app.addHook('onRequestAbort', (request, done) => {
    const span = (request as Traced)[SPAN];
    if (span) {
      span.setAttribute('error.type', 'aborted');
      span.setStatus({ code: SpanStatusCode.ERROR, message: 'the client closed the connection first' });
      span.end();
      (request as Traced)[SPAN] = null;
    }
    done();
  });
}

/** Eleven digits or more: the only ids the scrubber could change (a request id is [A-Za-z0-9._:-]). */
function mayHoldCpf(id: string): boolean {
  let digits = 0;
  for (let i = 0; i < id.length; i++) {
    const c = id.charCodeAt(i);
    if (c >= 48 && c <= 57 && ++digits >= 11) return true;
  }
  return false;
}
