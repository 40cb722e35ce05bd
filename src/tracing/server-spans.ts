import { type Attributes, type Context, defaultTextMapGetter, ROOT_CONTEXT, type Span, SpanKind, SpanStatusCode, type Tracer, trace } from '@opentelemetry/api';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { maskCpfsInText } from '../cpf.js';
import { loggedRequestUrl } from '../observability/logger.js';
import { percentDecoded, scrubText } from '../observability/scrub.js';
import type { ReservedRoot, RootIds } from './root-ids.js';
import { type LateSpan, propagator, type SpanParent, spanContextOf, startSpan, storedTraceparent, traceparentOf } from './spans.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * The route's server span begins once the handler knows its parent (LateServerSpan) when the
     * request carries no traceparent to continue: the callback's, a child of the submit it completes.
     */
    lateServerSpan?: boolean;
  }
}

const SPAN = Symbol('serverSpan');
const PARENT = Symbol('spanParent');
const LATE = Symbol('lateServerSpan');
type Traced = FastifyRequest & { [SPAN]: Span | null; [PARENT]: SpanParent | null; [LATE]: LateServerSpan | null };

/** The request's server span as a parent for what the request does; undefined when tracing is off. */
export function traceOf(request: FastifyRequest): SpanParent | undefined {
  return (request as Traced)[PARENT] ?? undefined;
}

/** traceOf, or on a route whose span begins late (and has not yet), that span to begin. */
export function lateTraceOf(request: FastifyRequest): SpanParent | LateSpan | undefined {
  return (request as Traced)[LATE] ?? traceOf(request);
}

/**
 * A server span begun after its request arrived (from the arrival on), once its parent is known:
 * a stored traceparent, or none (a root, with the ids reserved for it if they were asked for).
 */
class LateServerSpan implements LateSpan {
  #reserved: ReservedRoot | undefined;
  #begun: SpanParent | undefined;
  #waiting: Array<(parent: SpanParent) => void> | undefined;

  constructor(
    private readonly tracer: Tracer,
    private readonly roots: RootIds,
    private readonly name: string,
    private readonly startTime: number,
    private readonly attributes: () => Attributes,
    private readonly request: Traced,
  ) {}

  get rootTraceparent(): string {
    // Begun already (its client went away while it waited for its batch): what it is, not a reservation.
    const begun = storedTraceparent(this.#begun);
    if (begun) return begun;
    this.#reserved ??= this.roots.reserve(this.name, SpanKind.SERVER);
    const { traceId, spanId, sampled } = this.#reserved;
    return traceparentOf({ traceId, spanId, traceFlags: sampled ? 1 : 0 });
  }

  begin(traceparent: string | null): SpanParent {
    if (this.#begun) return this.#begun;
    const stored = spanContextOf(traceparent);
    const start = (context: Context) => startSpan(this.tracer, this.name, SpanKind.SERVER, context, this.attributes, { startTime: this.startTime });
    const reserved = this.#reserved;
    const span = stored
      ? start(trace.setSpanContext(ROOT_CONTEXT, stored))
      : reserved
        ? this.roots.startWith(reserved, () => start(ROOT_CONTEXT))
        : start(ROOT_CONTEXT);
    this.#begun = { tracer: this.tracer, context: trace.setSpan(ROOT_CONTEXT, span) };
    this.request[SPAN] = span;
    this.request[PARENT] = this.#begun;
    this.request[LATE] = null;
    for (const then of this.#waiting ?? []) then(this.#begun);
    this.#waiting = undefined;
    return this.#begun;
  }

  whenBegun(then: (parent: SpanParent) => void): void {
    if (this.#begun) then(this.#begun);
    else (this.#waiting ??= []).push(then);
  }
}

/**
 * A server span for every request, on every route (404s and refusals included): it continues an
 * incoming traceparent (and tracestate), is named by the route's template, and carries no query
 * value, no header but the request id, and no CPF-like digits of the path.
 */
export function traceRequests(app: FastifyInstance, tracer: Tracer, secrets: readonly string[] = [], roots?: RootIds): void {
  app.decorateRequest(SPAN, null);
  app.decorateRequest(PARENT, null);
  app.decorateRequest(LATE, null);
  // A request for a route's own path (one without parameters, asked with no query: every callback)
  // is shown as that path always is: computed once per route, not scrubbed again per request.
  const shownRoutes = new Map<string, string>();
  const shownUrl = (url: string, route: string | undefined): string => {
    if (url !== route) return loggedRequestUrl(url, secrets);
    let shown = shownRoutes.get(route);
    if (shown === undefined) shownRoutes.set(route, (shown = loggedRequestUrl(route, secrets)));
    return shown;
  };
  app.addHook('onRequest', (request, _reply, done) => {
    const incoming = withSafeTraceState(propagator.extract(ROOT_CONTEXT, request.headers, defaultTextMapGetter), secrets);
    // routeOptions is a getter that builds a new object on each read: read once.
    const routeOptions = request.routeOptions;
    const route = routeOptions.url;
    const name = route === undefined ? request.method : `${request.method} ${route}`;
    const attributes = () => {
      const shown = shownUrl(request.url, route);
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
    };
    if (roots && routeOptions.config.lateServerSpan && trace.getSpanContext(incoming) === undefined) {
      (request as Traced)[LATE] = new LateServerSpan(tracer, roots, name, performance.now(), attributes, request as Traced);
      return done();
    }
    const span = startSpan(tracer, name, SpanKind.SERVER, incoming, attributes);
    (request as Traced)[SPAN] = span;
    (request as Traced)[PARENT] = { tracer, context: trace.setSpan(incoming, span) };
    done();
  });
  app.addHook('onResponse', (request, reply, done) => {
    // A late span not begun yet (a refusal, an invalid callback, an error) begins now, as a root.
    (request as Traced)[LATE]?.begin(null);
    const span = (request as Traced)[SPAN];
    if (span) {
      span.setAttribute('http.response.status_code', reply.statusCode);
      if (reply.statusCode >= 500) {
        span.setAttribute('error.type', String(reply.statusCode));
        span.setStatus({ code: SpanStatusCode.ERROR });
      }
      span.end(performance.now());
      (request as Traced)[SPAN] = null;
    }
    done();
  });
  app.addHook('onRequestAbort', (request, done) => {
    (request as Traced)[LATE]?.begin(null);
    const span = (request as Traced)[SPAN];
    if (span) {
      span.setAttribute('error.type', 'aborted');
      span.setStatus({ code: SpanStatusCode.ERROR, message: 'the client closed the connection first' });
      span.end(performance.now());
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
