import { diag, type Tracer } from '@opentelemetry/api';
import { parseKeyPairsIntoRecord } from '@opentelemetry/core';
import { OTLPTraceExporter as JsonTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPExporterBase } from '@opentelemetry/otlp-exporter-base';
import { convertLegacyHttpOptions, createOtlpHttpExportDelegate } from '@opentelemetry/otlp-exporter-base/node-http';
import { ProtobufTraceSerializer, TraceExporterMetricsHelper } from '@opentelemetry/otlp-transformer';
import { defaultResource, detectResources, emptyResource, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor, type ReadableSpan, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';
import { DEFAULT_SERVICE_NAME, type TracingConfig } from '../config/config.js';
import { OtlpSpanEncoder } from './otlp-protobuf.js';
import { type RootIds, reservingIds } from './root-ids.js';

/** The instrumentation scope our spans are reported under. */
export const TRACER_NAME = 'underwriting-gateway';

export interface Tracing {
  tracer: Tracer;
  /** Root spans whose traceparent is known before they begin (the callback's server span). */
  roots: RootIds;
  /** Exports every span ended so far. */
  flush(): Promise<void>;
  /**
   * Exports what is still queued and stops; bounded by timeoutMs. Never fails: spans the collector
   * refuses (a 4xx, a 500) are said through diag (a warn of the opentelemetry component), and the
   * process's own shutdown, which has finished by then, is not made a failure by them.
   */
  shutdown(timeoutMs: number): Promise<void>;
}

/**
 * The official SDK, started only when tracing is configured: spans batched (OTEL_BSP_* honoured)
 * and POSTed over OTLP/HTTP in the configured protocol. The exporter reads its own standard
 * variables (OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _COMPRESSION, certificates), the provider the
 * span limits, the resource OTEL_RESOURCE_ATTRIBUTES; OTEL_TRACES_SAMPLER is read as the SDK reads
 * it, into the sampler root-ids.ts asks ahead for a reserved root.
 *
 * Nothing is registered globally: no context manager (the gateway passes a span's context
 * explicitly, so no AsyncLocalStorage runs on every promise) and no global provider, so two
 * instances in one process (tests) each export with their own.
 */
export function startTracing(config: TracingConfig): Tracing {
  const exporter = config.protocol === 'http/json' ? new JsonTraceExporter({ url: config.tracesUrl }) : protobufExporter(config.tracesUrl);
  const resource = defaultResource()
    .merge(resourceFromAttributes({ [ATTR_SERVICE_NAME]: DEFAULT_SERVICE_NAME }))
    .merge(detectResources({ detectors: [envDetector] }))
    .merge(config.serviceName === undefined ? emptyResource() : resourceFromAttributes({ [ATTR_SERVICE_NAME]: config.serviceName }));
  const ids = reservingIds();
  const provider = new BasicTracerProvider({
    resource,
    idGenerator: ids.idGenerator,
    sampler: ids.sampler,
    spanProcessors: [new BatchSpanProcessor(exporter)],
  });
  return {
    tracer: provider.getTracer(TRACER_NAME),
    roots: ids,
    flush: () => provider.forceFlush(),
    async shutdown(timeoutMs) {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, timeoutMs);
      });
      try {
        const exported = provider.shutdown().catch((err: unknown) => {
          diag.warn(`the last spans were not exported: ${err instanceof Error ? err.message : String(err)}`);
        });
        await Promise.race([exported, late]);
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

const MIN_HIDDEN_HEADER_CHARS = 8;

/**
 * The values of the headers the exporter sends the collector (OTEL_EXPORTER_OTLP_HEADERS and the
 * traces' own, as the SDK reads them: URL-decoded), and the credential after a scheme ("Bearer
 * <token>"): what the SDK's messages must never carry into a log line, though a collector's error
 * page that echoes the request (the SDK puts its body in the error it reports) holds them.
 */
export function otlpHeaderValues(env: NodeJS.ProcessEnv): string[] {
  const values: string[] = [];
  for (const name of ['OTEL_EXPORTER_OTLP_HEADERS', 'OTEL_EXPORTER_OTLP_TRACES_HEADERS']) {
    for (const value of Object.values(parseKeyPairsIntoRecord(env[name]))) {
      values.push(value);
      const credential = value.slice(value.lastIndexOf(' ') + 1);
      if (credential !== value && credential !== '') values.push(credential);
    }
  }
  // A value of a few characters (a tenant `eu`, a flag `1`) is no credential, and replaced wherever
  // it occurs it would garble every message. The longest first: a value goes whole before a credential in it.
  return values.filter((v) => v.length >= MIN_HIDDEN_HEADER_CHARS).sort((a, b) => b.length - a.length);
}

/**
 * OTLP/HTTP protobuf as @opentelemetry/exporter-trace-otlp-proto builds it (the same transport:
 * headers, timeout, compression, certificates and retries from the standard variables), with our
 * one-pass encoder instead of the SDK's serializer (docs/tracing.md, Cost).
 */
function protobufExporter(url: string): SpanExporter {
  const encoder = new OtlpSpanEncoder();
  const serializer = {
    serializeRequest: (spans: ReadableSpan[]) => encoder.encode(spans),
    deserializeResponse: (data: Uint8Array) => ProtobufTraceSerializer.deserializeResponse(data),
  };
  const options = convertLegacyHttpOptions({ url }, 'TRACES', 'v1/traces', { 'Content-Type': 'application/x-protobuf' });
  return new OTLPExporterBase(createOtlpHttpExportDelegate(options, serializer, 'otlp_http_span_exporter', TraceExporterMetricsHelper, undefined));
}
