import {
  type Attributes,
  type Context,
  isSpanContextValid,
  type Link,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  SpanKind,
  type SpanOptions,
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

/**
 * A span that begins once its parent is known (server-spans.ts: the callback's, begun by the
 * statement that finds the submit it completes).
 */
export interface LateSpan {
  /** The traceparent it has if it begins as a root: what is stored for it before it begins. */
  readonly rootTraceparent: string;
  /** Begins it, once (later calls give the same parent): a child of the traceparent, or with none a root. */
  begin(traceparent: string | null): SpanParent;
  /** Runs then once it has begun (at once if it has). */
  whenBegun(then: (parent: SpanParent) => void): void;
}

/** Where a span hangs, or one that begins later. */
export type SpanOrigin = SpanParent | LateSpan;

const isLate = (origin: SpanOrigin): origin is LateSpan => 'begin' in origin;

/** Runs then with the origin's parent: now, or once a late span has begun. */
export function whenBegun(origin: SpanOrigin, then: (parent: SpanParent) => void): void {
  if (isLate(origin)) origin.whenBegun(then);
  else then(origin);
}

/** The origin as a parent: a late span begun as the traceparent's child (or a root); nothing when there is none. */
export function begunParent(origin: SpanOrigin | undefined, traceparent: string | null): SpanParent | undefined {
  return origin === undefined ? undefined : isLate(origin) ? origin.begin(traceparent) : origin;
}

/** The traceparent later hops store for this origin (a late span's as a root); null when there is none. */
export function originTraceparent(origin: SpanOrigin | undefined): string | null {
  return origin !== undefined && isLate(origin) ? origin.rootTraceparent : storedTraceparent(origin);
}

/** The value of a lowercase hex digit's char code, or -1: a traceparent's ids are lowercase (W3C). */
function hexValue(code: number): number {
  return code >= 0x30 && code <= 0x39 ? code - 0x30 : code >= 0x61 && code <= 0x66 ? code - 0x57 : -1;
}

/**
 * Whether text[from, to) is lowercase hex with at least one digit other than 0 (an id of zeros is
 * invalid): what `isSpanContextValid` checks by two regular expressions more, in one pass.
 */
function isHexId(text: string, from: number, to: number): boolean {
  let nonZero = false;
  for (let i = from; i < to; i++) {
    const v = hexValue(text.charCodeAt(i));
    if (v < 0) return false;
    if (v !== 0) nonZero = true;
  }
  return nonZero;
}

/**
 * A W3C traceparent (version 00: `00-<32 hex>-<16 hex>-<2 hex>`) as a remote span context;
 * undefined when it is not one, or when its trace or span id is all zeros. Read by hand rather than
 * by a regular expression and isSpanContextValid's two more: it runs twice or more per callback.
 */
export function spanContextOf(traceparent: string | null | undefined): SpanContext | undefined {
  if (!traceparent || traceparent.length !== 55) return undefined;
  const t = traceparent;
  if (t.charCodeAt(0) !== 0x30 || t.charCodeAt(1) !== 0x30 || t.charCodeAt(2) !== 0x2d || t.charCodeAt(35) !== 0x2d || t.charCodeAt(52) !== 0x2d) return undefined;
  const flagsHigh = hexValue(t.charCodeAt(53));
  const flagsLow = hexValue(t.charCodeAt(54));
  if (flagsHigh < 0 || flagsLow < 0 || !isHexId(t, 3, 35) || !isHexId(t, 36, 52)) return undefined;
  return { traceId: t.slice(3, 35), spanId: t.slice(36, 52), traceFlags: flagsLow & 1, isRemote: true };
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
  extra?: { links?: Link[]; startTime?: Date | number },
): Span {
  // Options built field by field rather than by spreading `extra` (a generic copy on every span).
  const options: SpanOptions = { kind };
  if (extra?.links !== undefined) options.links = extra.links;
  if (extra?.startTime !== undefined) options.startTime = extra.startTime;
  const span = tracer.startSpan(name, options, context);
  if (span.isRecording()) span.setAttributes(typeof attributes === 'function' ? attributes() : attributes);
  return span;
}

/** A child of the parent, with the context its own children hang from. */
export function childSpan(parent: SpanParent, name: string, kind: SpanKind, attributes: Attributes, links?: Link[]): { span: Span; parent: SpanParent } {
  const span = startSpan(parent.tracer, name, kind, parent.context, attributes, links === undefined ? undefined : { links });
  return { span, parent: { tracer: parent.tracer, context: trace.setSpan(parent.context, span) } };
}

/** Ends a span as failed, with the low-cardinality error.type and a message that names no secret. */
export function endFailed(span: Span, errorType: string, message?: string, endTime?: number): void {
  span.setAttribute('error.type', errorType);
  span.setStatus(message === undefined ? { code: SpanStatusCode.ERROR } : { code: SpanStatusCode.ERROR, message });
  span.end(endTime);
}

const statementAttributes = (statement: { name: string }): Attributes => ({ 'db.system.name': 'postgresql', 'db.query.summary': statement.name });

/** A failed statement's error.type: its SQLSTATE, never PostgreSQL's message. */
function sqlState(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : 'error';
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
  const span = startSpan(parent.tracer, statement.name, SpanKind.CLIENT, parent.context, statementAttributes(statement), links === undefined ? undefined : { links });
  try {
    const result = await run();
    span.end();
    return result;
  } catch (err) {
    endFailed(span, sqlState(err));
    throw err;
  }
}

/**
 * A statement's client span made once it has run (from startTime to endTime, performance.now()
 * readings), because its parent began only then; failed when it threw `failure`.
 */
export function endedStatementSpan(
  parent: SpanParent,
  statement: { name: string },
  links: Link[] | undefined,
  times: { startTime: number; endTime: number },
  failure?: { err: unknown },
): void {
  const { startTime, endTime } = times;
  const span = startSpan(parent.tracer, statement.name, SpanKind.CLIENT, parent.context, statementAttributes(statement), links === undefined ? { startTime } : { startTime, links });
  if (failure) endFailed(span, sqlState(failure.err), undefined, endTime);
  else span.end(endTime);
}

/**
 * Where a statement that writes many callers' rows at once (a group commit) is traced: a child of
 * the first traced caller's span, linking to the others'. Nothing when none is traced.
 */
export function batchSpanParent(parents: readonly (SpanParent | undefined)[]): { parent: SpanParent | undefined; links: Link[] | undefined } {
  // One pass, no intermediate arrays: it runs once per batch over every caller of the batch.
  let parent: SpanParent | undefined;
  let links: Link[] | undefined;
  for (const p of parents) {
    if (p === undefined) continue;
    if (parent === undefined) {
      parent = p;
      continue;
    }
    const context = trace.getSpanContext(p.context);
    if (context) (links ??= []).push({ context });
  }
  return { parent, links };
}

/** A customer key fit for a span: a CPF-shaped one (CUSTOMER_UUID_ALLOW_CPF) never leaves. */
export function customerAttribute(customerUuid: string): Attributes {
  return { 'gateway.customer_uuid': scrubText(customerUuid) };
}

/**
 * Joins what the origin's span did to a trace begun earlier (the submit's, as stored). A late span
 * that began there, as the stored span's child, is given the attributes. Otherwise (a span that
 * continued an incoming traceparent, or a late one begun as a root because its client went away
 * first) the span links to the stored context, and a span named `name` is made in that trace, as a
 * child of the stored span, from startTime to now, linking back. So the underwriting's own trace
 * shows the step either way, and the step's own trace points to it.
 */
export function joinStoredTrace(origin: SpanOrigin, traceparent: string | null, name: string, startTime: Date, attributes: Attributes): void {
  const stored = spanContextOf(traceparent);
  const parent = begunParent(origin, traceparent)!;
  const current = trace.getSpan(parent.context);
  if (!stored || !current) return;
  if (current.spanContext().traceId === stored.traceId) {
    if (current.isRecording()) current.setAttributes(attributes);
    return;
  }
  if (current.isRecording()) current.addLink({ context: stored });
  startSpan(parent.tracer, name, SpanKind.INTERNAL, trace.setSpanContext(ROOT_CONTEXT, stored), attributes, {
    startTime,
    links: [{ context: current.spanContext() }],
  }).end();
}
