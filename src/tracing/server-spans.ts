import { type Attributes, type Context, defaultTextMapGetter, ROOT_CONTEXT, type Span, SpanKind, SpanStatusCode, type Tracer, trace } from '@opentelemetry/api';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { maskCpfsInText } from '../cpf.js';
import { loggedRequestUrl } from '../observability/logger.js';
import { percentDecoded, scrubText } from '../observability/scrub.js';
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
export function traceRequests(app: FastifyInstance, tracer: Tracer, secrets: readonly string[] = []): void {
  app.decorateRequest(SPAN, null);
  app.decorateRequest(PARENT, null);
  app.addHook('onRequest', (request, _reply, done) => {
    const incoming = withSafeTraceState(propagator.extract(ROOT_CONTEXT, request.headers, defaultTextMapGetter), secrets);
    const route = request.routeOptions.url;
    const span = startSpan(tracer, route === undefined ? request.method : `${request.method} ${route}`, SpanKind.SERVER, incoming, () => {
      const shown = loggedRequestUrl(request.url, secrets);
      const mark = shown.indexOf('?');
      const attributes: Attributes = {
        'http.request.method': request.method,
        'url.path': mark === -1 ? shown : shown.slice(0, mark),
        'client.address': request.ip,
        // genReqId (app.ts) already replaced a CPF-shaped id: this is the id as answered, logged and forwarded.
        'http.request.header.x-request-id': [request.id],
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

/**
 * The incoming context without the tracestate entries that hold a CPF-like digit run or one of our
 * secrets (and without any tracestate when the entries kept still make one together): the span context's tracestate is exported with every span of the trace (and sent on to
 * the provider), and a caller may write anything there.
 */
function withSafeTraceState(context: Context, secrets: readonly string[]): Context {
  const spanContext = trace.getSpanContext(context);
  const state = spanContext?.traceState;
  if (!spanContext || !state) return context;
  let kept = state;
  for (const entry of state.serialize().split(',')) {
    if (holdsCpfOrSecret(entry, secrets)) kept = kept.unset(entry.slice(0, entry.indexOf('=')));
  }
  // Entries are joined by commas when exported: one that ends in digits and a vendor key that
  // begins with them (`a=529.982.247,25x@v=1`) make a CPF no entry holds alone. Then none is kept.
  if (holdsCpfOrSecret(kept.serialize(), secrets)) {
    const { traceState: _dropped, ...withoutState } = spanContext;
    return trace.setSpanContext(context, withoutState);
  }
  return kept === state ? context : trace.setSpanContext(context, { ...spanContext, traceState: kept });
}

/**
 * A CPF-like run or a secret, as written or percent-decoded (`529%2E982%2E247%2D25`, `%252E`, fullwidth
 * digits as `%EF%BC%95`), or a CPF whose escapes only maskCpfsInText reads (`\uff15`): a tracestate
 * value is printable ASCII, so a vendor that puts one there encodes it.
 */
function holdsCpfOrSecret(text: string, secrets: readonly string[]): boolean {
  if (scrubText(text, secrets) !== text || maskCpfsInText(text) !== text) return true;
  const decoded = percentDecoded(text);
  return decoded !== text && scrubText(decoded, secrets) !== decoded;
}
