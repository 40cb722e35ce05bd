import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import t from 'tap';
import { OtlpSpanEncoder } from '../../src/tracing/otlp-protobuf.js';
import { spanContextOf } from '../../src/tracing/spans.js';

// The exporter's own protobuf encoder against the SDK's serializer: the same spans, the same bytes.

function spansOfEveryShape(count: number): ReadableSpan[] {
  const memory = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'gateway-ç', 'service.instance.id': 'a1', 'process.pid': 4242 }),
    spanProcessors: [new SimpleSpanProcessor(memory)],
  });
  const tracer = provider.getTracer('underwriting-gateway', '1.2.3');
  const other = provider.getTracer('another-scope');
  const stored = spanContextOf('00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01')!;
  for (let i = 0; i < count; i++) {
    const server = tracer.startSpan('POST /v1/underwritings', { kind: SpanKind.SERVER }, trace.setSpanContext(ROOT_CONTEXT, stored));
    server.setAttributes({
      'http.request.method': 'POST',
      'url.path': `/v1/underwritings/${i}`,
      'http.request.header.x-request-id': [`req-${i}`, 'ünïcode ✓ 😀'],
      'server.port': 443,
      'http.request.resend_count': -3 - i,
      'gateway.ratio': 0.25 + i,
      'gateway.flag': i % 2 === 0,
      'gateway.long': 'x'.repeat(200 + i),
      // Around the one length byte of a string copied as ASCII (127), and one that stops being ASCII late.
      'gateway.edge': 'y'.repeat(126 + (i % 4)),
      'gateway.late': `${'z'.repeat(100 + (i % 40))}é`,
      // Keys whose pairs are kept: values that vary past the cache's size, a long one, a number, non-ASCII.
      'http.route': `/v1/underwritings/${i % 700}`,
      'error.type': i % 3 === 0 ? 'tímeout' : 'E'.repeat(60 + (i % 10)),
      'server.address': 7,
    });
    const child = tracer.startSpan('insert_submitting', { kind: SpanKind.CLIENT, links: [{ context: stored, attributes: { why: 'stored' } }] }, trace.setSpan(ROOT_CONTEXT, server));
    child.setAttributes({ 'db.system.name': 'postgresql', 'db.query.summary': 'insert_submitting' });
    child.addEvent('retry', { attempt: 2 });
    child.setStatus({ code: SpanStatusCode.ERROR, message: 'the provider said no' });
    child.end();
    other.startSpan('underwriting.callback', { startTime: new Date(1_700_000_000_123 + i) }).end();
    server.setStatus({ code: SpanStatusCode.OK });
    server.end();
  }
  return memory.getFinishedSpans();
}

t.test('a batch encodes to the bytes the SDK serializer makes', async (t) => {
  const encoder = new OtlpSpanEncoder();
  for (const count of [1, 3, 300, 1200]) {
    const spans = spansOfEveryShape(count);
    const official = Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)!);
    t.same(Buffer.from(encoder.encode(spans)), official, `${count * 3} spans`);
    // Encoded a second time: from the kept strings, resource and scopes.
    t.same(Buffer.from(encoder.encode(spans)), official, `${count * 3} spans, again`);
  }
});

t.test('an encoded request stays as it was while the next one is encoded', async (t) => {
  const encoder = new OtlpSpanEncoder();
  const first = encoder.encode(spansOfEveryShape(2));
  const copy = Buffer.from(first);
  encoder.encode(spansOfEveryShape(5));
  t.same(Buffer.from(first), copy);
});
