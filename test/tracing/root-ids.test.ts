import { ROOT_CONTEXT, SpanKind } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import t, { type Test } from 'tap';
import { reservingIds } from '../../src/tracing/root-ids.js';

// The callback's server span may begin after its traceparent was stored (an unmatched callback's
// event): a reserved root must begin with exactly those ids, and be recorded exactly when it said so.

function withSampler(t: Test, sampler: string, arg?: string) {
  const before = { sampler: process.env.OTEL_TRACES_SAMPLER, arg: process.env.OTEL_TRACES_SAMPLER_ARG };
  process.env.OTEL_TRACES_SAMPLER = sampler;
  if (arg === undefined) delete process.env.OTEL_TRACES_SAMPLER_ARG;
  else process.env.OTEL_TRACES_SAMPLER_ARG = arg;
  t.teardown(() => {
    for (const [name, value] of [['OTEL_TRACES_SAMPLER', before.sampler], ['OTEL_TRACES_SAMPLER_ARG', before.arg]] as const) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  });
}

function provider() {
  const ids = reservingIds();
  const exporter = new InMemorySpanExporter();
  const sdk = new BasicTracerProvider({ idGenerator: ids.idGenerator, sampler: ids.sampler, spanProcessors: [new SimpleSpanProcessor(exporter)] });
  return { ids, exporter, tracer: sdk.getTracer('test') };
}

t.test('a reserved root begins with its reserved ids, and is recorded exactly when the reservation said (one trace in two sampled)', async (t) => {
  withSampler(t, 'parentbased_traceidratio', '0.5');
  const { ids, exporter, tracer } = provider();
  const decisions = new Set<boolean>();
  for (let i = 0; i < 200; i++) {
    const reserved = ids.reserve('POST /v1/callbacks/underwriting', SpanKind.SERVER);
    const span = ids.startWith(reserved, () => tracer.startSpan('POST /v1/callbacks/underwriting', { kind: SpanKind.SERVER }, ROOT_CONTEXT));
    t.same({ traceId: span.spanContext().traceId, spanId: span.spanContext().spanId }, { traceId: reserved.traceId, spanId: reserved.spanId });
    t.equal(span.isRecording(), reserved.sampled);
    t.equal(span.spanContext().traceFlags & 1, reserved.sampled ? 1 : 0);
    decisions.add(reserved.sampled);
    span.end();
  }
  t.same([...decisions].sort(), [false, true], 'both decisions were seen');
  t.ok(exporter.getFinishedSpans().every((s) => s.spanContext().traceFlags === 1));
});

t.test('outside startWith ids are random, and a reservation is never given twice', async (t) => {
  withSampler(t, 'always_off');
  const { ids, tracer } = provider();
  const reserved = ids.reserve('x', SpanKind.SERVER);
  t.equal(reserved.sampled, false, 'always_off: a reserved root says it is not sampled');
  const after = ids.startWith(reserved, () => 0);
  t.equal(after, 0);
  const other = tracer.startSpan('y', {}, ROOT_CONTEXT).spanContext();
  t.not(other.traceId, reserved.traceId);
  t.not(other.spanId, reserved.spanId);
});
