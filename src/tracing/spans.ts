import {
  type Attributes,
  type Context,
  isSpanContextValid,
  type Link,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { scrubText } from '../observability/scrub.js';

// The few ways the gateway makes spans. Contexts travel explicitly (a SpanParent handed down),
// never through a context manager: with tracing off there is no parent, and nothing is done.

/** traceparent and tracestate, read from requests and written on the calls the gateway makes. */
export const propagator = new W3CTraceContextPropagator();

/** Where a new span hangs: the tracer that makes it and its parent's context. */
export interface SpanParent {
  tracer: Tracer;
  context: Context;
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** A W3C traceparent (version 00) as a remote span context; undefined when it is not one. */
export function spanContextOf(traceparent: string | null | undefined): SpanContext | undefined {
  const m = traceparent ? TRACEPARENT.exec(traceparent) : null;
  if (!m) return undefined;
  const context: SpanContext = { traceId: m[1]!, spanId: m[2]!, traceFlags: Number.parseInt(m[3]!, 16) & 1, isRemote: true };
  return isSpanContextValid(context) ? context : undefined;
}

/** The W3C traceparent of a span context: what is stored for later hops and sent downstream. */
export function traceparentOf(context: SpanContext): string {
  return `00-${context.traceId}-${context.spanId}-0${context.traceFlags & 1}`;
}

/** The traceparent of the span a parent holds, or null when there is none (tracing off). */
export function storedTraceparent(parent: SpanParent | undefined): string | null {
  const span = parent ? trace.getSpan(parent.context) : undefined;
  return span && isSpanContextValid(span.spanContext()) ? traceparentOf(span.spanContext()) : null;
}

/** A context whose parent is the stored traceparent (or the root, when there is none). */
export function contextOfTraceparent(traceparent: string | null | undefined): Context {
  const context = spanContextOf(traceparent);
  return context ? trace.setSpanContext(ROOT_CONTEXT, context) : ROOT_CONTEXT;
}

/**
 * Starts a span and gives it its attributes only when it records (a span the sampler dropped
 * never computes them). They are set on the started span rather than passed to startSpan, which
 * would sanitize them twice more for the sampler; our samplers (the OTEL_TRACES_SAMPLER ones)
 * decide on the parent and the trace id, never on attributes.
 */
export function startSpan(
  tracer: Tracer,
  name: string,
  kind: SpanKind,
  context: Context,
  attributes: Attributes | (() => Attributes),
  extra?: { links?: Link[]; startTime?: Date },
): Span {
  const span = tracer.startSpan(name, extra === undefined ? { kind } : { kind, ...extra }, context);
  if (span.isRecording()) span.setAttributes(typeof attributes === 'function' ? attributes() : attributes);
  return span;
}

/** A child of the parent, with the context its own children hang from. */
export function childSpan(parent: SpanParent, name: string, kind: SpanKind, attributes: Attributes, links?: Link[]): { span: Span; parent: SpanParent } {
  const span = startSpan(parent.tracer, name, kind, parent.context, attributes, links === undefined ? undefined : { links });
  return { span, parent: { tracer: parent.tracer, context: trace.setSpan(parent.context, span) } };
}

/** Ends a span as failed, with the low-cardinality error.type and a message that names no secret. */
export function endFailed(span: Span, errorType: string, message?: string): void {
  span.setAttribute('error.type', errorType);
  span.setStatus(message === undefined ? { code: SpanStatusCode.ERROR } : { code: SpanStatusCode.ERROR, message });
  span.end();
}

/**
 * Runs one statement of our statement runner inside a client span named by the statement. Its
 * text (placeholders only) is not exported: it is fixed, in the source by that name, and would
 * make most of every exported byte.
 */
export async function inStatementSpan<R>(
  parent: SpanParent,
  statement: { name: string },
  links: Link[] | undefined,
  run: () => Promise<R>,
): Promise<R> {
  const span = startSpan(
    parent.tracer,
    statement.name,
    SpanKind.CLIENT,
    parent.context,
    { 'db.system.name': 'postgresql', 'db.query.summary': statement.name },
    links === undefined ? undefined : { links },
  );
  try {
    const result = await run();
    span.end();
    return result;
  } catch (err) {
    const code = (err as { code?: unknown } | null)?.code;
    endFailed(span, typeof code === 'string' ? code : 'error');
    throw err;
  }
}

/**
 * Where a statement that writes many callers' rows at once (a group commit) is traced: a child of
 * the first traced caller's span, linking to the others'. Nothing when none is traced.
 */
export function batchSpanParent(parents: readonly (SpanParent | undefined)[]): { parent: SpanParent | undefined; links: Link[] | undefined } {
  const traced = parents.filter((p): p is SpanParent => p !== undefined);
  const links = traced.slice(1).flatMap((p) => {
    const context = trace.getSpanContext(p.context);
    return context ? [{ context }] : [];
  });
  return { parent: traced[0], links: links.length > 0 ? links : undefined };
}

/** A customer key fit for a span: a CPF-shaped one (CUSTOMER_UUID_ALLOW_CPF) never leaves. */
export function customerAttribute(customerUuid: string): Attributes {
  return { 'gateway.customer_uuid': scrubText(customerUuid) };
}

/**
 * Joins what the parent's span did to a trace begun earlier (the submit's, as stored): the span
 * links to the stored context, and a span named `name` is made in that trace, as a child of the
 * stored span, from startTime to now, linking back. So the underwriting's own trace shows the
 * step, and the step's own trace (which continued its incoming traceparent) points to it.
 */
export function joinStoredTrace(parent: SpanParent, traceparent: string | null, name: string, startTime: Date, attributes: Attributes): void {
  const stored = spanContextOf(traceparent);
  const current = trace.getSpan(parent.context);
  if (!stored || !current) return;
  current.addLink({ context: stored });
  startSpan(parent.tracer, name, SpanKind.INTERNAL, trace.setSpanContext(ROOT_CONTEXT, stored), attributes, {
    startTime,
    links: [{ context: current.spanContext() }],
  }).end();
}
