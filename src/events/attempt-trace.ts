import { type Attributes, defaultTextMapSetter, ROOT_CONTEXT, SpanKind, type Tracer, trace } from '@opentelemetry/api';
import { contextOfTraceparent, customerAttribute, endFailed, propagator, startSpan } from '../tracing/spans.js';
import type { WebhookTarget } from './targets.js';

/** What one attempt carries besides the Standard Webhooks headers, and the span around it. */
export interface AttemptTrace {
  /** x-request-id (the event's origin's), and with tracing on traceparent (and tracestate). */
  headers: Record<string, string>;
  /** Ends the attempt's span: a 2xx, another status, or no answer (error set). */
  finish(httpStatus: number | null, error: string | null, timedOut: boolean): void;
}

/** The event of one attempt as far as tracing is concerned. */
export interface TracedDelivery {
  publicId: string;
  customer: string;
  /** Attempts made before this one. */
  attempts: number;
  /** Stored with the event: its request's submit (or its unmatched callback); null when tracing was off. */
  traceparent: string | null;
  requestId: string | null;
}

const untraced = (): void => {};

/**
 * Each attempt a client span continuing the event's stored trace (a root of its own when none was
 * stored), its traceparent on the request; with tracing off, the request id only. The URL shown is
 * the target's redacted one: no userinfo, no query value.
 */
export function attemptTrace(tracer: Tracer | undefined, delivery: TracedDelivery, target: Pick<WebhookTarget, 'shown'>): AttemptTrace {
  const headers: Record<string, string> = {};
  if (delivery.requestId !== null) headers['x-request-id'] = delivery.requestId;
  if (tracer === undefined) return { headers, finish: untraced };
  const span = startSpan(tracer, 'POST', SpanKind.CLIENT, contextOfTraceparent(delivery.traceparent), () => {
    const url = new URL(target.shown);
    const attributes: Attributes = {
      'http.request.method': 'POST',
      'url.full': target.shown,
      'server.address': url.hostname,
      'server.port': Number(url.port || (url.protocol === 'https:' ? 443 : 80)),
      'gateway.event.id': delivery.publicId,
      ...customerAttribute(delivery.customer),
    };
    if (delivery.attempts > 0) attributes['http.request.resend_count'] = delivery.attempts;
    return attributes;
  });
  propagator.inject(trace.setSpan(ROOT_CONTEXT, span), headers, defaultTextMapSetter);
  return {
    headers,
    finish(httpStatus, error, timedOut) {
      if (httpStatus !== null) span.setAttribute('http.response.status_code', httpStatus);
      if (error === null) span.end();
      else endFailed(span, httpStatus !== null ? String(httpStatus) : timedOut ? 'timeout' : 'unreachable');
    },
  };
}
