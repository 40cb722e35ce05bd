import type { AttributeValue, Attributes, HrTime, Link, SpanContext } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';

// The spans of one export as an OTLP ExportTraceServiceRequest (opentelemetry-proto, trace/v1),
// written in one pass into a reused buffer. The SDK's serializer measures every string twice and
// copies ids byte by byte in JavaScript, which was most of tracing's exported cost per submit
// (docs/tracing.md, Cost); here repeated strings (attribute keys, span names, the resource and the
// scope) are encoded once and copied, ids and other strings are written by Buffer's native code.

/** Encoded strings kept at most (keys, names, the few repeating values): cleared when full. */
const CACHE_MAX = 512;
/** Attributes whose values repeat (a method, a route, a statement's name): their encoding is kept too. */
const LOW_CARDINALITY = new Set(['http.request.method', 'http.route', 'url.scheme', 'db.system.name', 'db.query.summary', 'server.address', 'error.type']);
/** A longer value is never kept, whatever its key. */
const CACHED_VALUE_MAX_CHARS = 64;
const SPAN_FLAGS_HAS_IS_REMOTE = 0x100;
const SPAN_FLAGS_IS_REMOTE = 0x200;

class Writer {
  buf = Buffer.allocUnsafe(64 * 1024);
  pos = 0;

  ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.pos + n) size *= 2;
    const bigger = Buffer.allocUnsafe(size);
    this.buf.copy(bigger, 0, 0, this.pos);
    this.buf = bigger;
  }

  varint(value: number): void {
    this.ensure(10);
    let v = value;
    while (v > 0x7f) {
      this.buf[this.pos++] = (v % 0x80) | 0x80;
      v = Math.floor(v / 0x80);
    }
    this.buf[this.pos++] = v;
  }

  tag(field: number, wireType: number): void {
    this.varint((field << 3) | wireType);
  }

  /** Reserves one byte for a length; end() writes it, moving the message when it needs more. */
  begin(): number {
    this.ensure(1);
    return this.pos++;
  }

  end(at: number): void {
    const length = this.pos - at - 1;
    const size = varintSize(length);
    if (size > 1) {
      this.ensure(size - 1);
      this.buf.copyWithin(at + size, at + 1, this.pos);
      this.pos += size - 1;
    }
    let v = length;
    let p = at;
    while (v > 0x7f) {
      this.buf[p++] = (v % 0x80) | 0x80;
      v = Math.floor(v / 0x80);
    }
    this.buf[p] = v;
  }

  bytes(data: Uint8Array): void {
    this.varint(data.length);
    this.ensure(data.length);
    this.buf.set(data, this.pos);
    this.pos += data.length;
  }

  string(text: string): void {
    const length = Buffer.byteLength(text, 'utf8');
    this.varint(length);
    this.ensure(length);
    this.pos += this.buf.write(text, this.pos, length, 'utf8');
  }

  /** A W3C id (lowercase hex, as the SDK makes and validates them) as its bytes. */
  hexId(hex: string): void {
    const length = hex.length >> 1;
    this.varint(length);
    this.ensure(length);
    const written = this.buf.write(hex, this.pos, length, 'hex');
    if (written < length) this.buf.fill(0, this.pos + written, this.pos + length); // not hex: never from the SDK
    this.pos += length;
  }

  fixed32(value: number): void {
    this.ensure(4);
    this.pos = this.buf.writeUInt32LE(value >>> 0, this.pos);
  }

  /** An HrTime as fixed64 nanoseconds since the epoch (seconds * 1e9 exceeds 2^53: split in two). */
  time(time: HrTime): void {
    const seconds = time[0];
    const nanos = time[1];
    const lower = (seconds % 0x10000) * 1e9 + nanos; // < 2^53
    const upper = Math.floor(seconds / 0x10000) * 1e9; // times 2^16, < 2^53
    const low = (lower % 0x100000000) + (upper % 0x10000) * 0x10000;
    const high = Math.floor(lower / 0x100000000) + Math.floor(upper / 0x10000) + Math.floor(low / 0x100000000);
    this.ensure(8);
    this.buf.writeUInt32LE(low % 0x100000000, this.pos);
    this.buf.writeUInt32LE(high >>> 0, this.pos + 4);
    this.pos += 8;
  }

  raw(data: Uint8Array): void {
    this.ensure(data.length);
    this.buf.set(data, this.pos);
    this.pos += data.length;
  }
}

function varintSize(value: number): number {
  let size = 1;
  let v = value;
  while (v > 0x7f) {
    size++;
    v = Math.floor(v / 0x80);
  }
  return size;
}

/** Serializes export requests; one per exporter (its buffer and caches are reused). */
export class OtlpSpanEncoder {
  private readonly writer = new Writer();
  private readonly strings = new Map<string, Buffer>();
  private readonly encoded = new WeakMap<object, Buffer>();

  /** The request's bytes: a fresh copy, safe to keep while the next request is encoded. */
  encode(spans: readonly ReadableSpan[]): Uint8Array {
    const w = this.writer;
    w.pos = 0;
    for (const [resource, scopes] of groupByResourceAndScope(spans)) {
      w.tag(1, 2); // resource_spans
      const rs = w.begin();
      w.tag(1, 2); // resource
      w.raw(this.once(resource, () => this.resourceBytes(resource)));
      for (const [scope, scoped] of scopes) {
        w.tag(2, 2); // scope_spans
        const ss = w.begin();
        w.tag(1, 2); // scope
        w.raw(this.once(scope, () => this.scopeBytes(scope)));
        for (const span of scoped) this.span(span);
        if (scope.schemaUrl) {
          w.tag(3, 2);
          w.string(scope.schemaUrl);
        }
        w.end(ss);
      }
      if (resource.schemaUrl) {
        w.tag(3, 2);
        w.string(resource.schemaUrl);
      }
      w.end(rs);
    }
    return Buffer.from(w.buf.subarray(0, w.pos));
  }

  private span(span: ReadableSpan): void {
    const w = this.writer;
    const context = span.spanContext();
    w.tag(2, 2);
    const at = w.begin();
    w.tag(1, 2);
    w.hexId(context.traceId);
    w.tag(2, 2);
    w.hexId(context.spanId);
    const traceState = context.traceState?.serialize();
    if (traceState) {
      w.tag(3, 2);
      w.string(traceState);
    }
    const parent = span.parentSpanContext;
    if (parent?.spanId) {
      w.tag(4, 2);
      w.hexId(parent.spanId);
    }
    w.tag(5, 2);
    this.cached(span.name);
    // The API's kinds start at INTERNAL = 0; the protocol's at UNSPECIFIED = 0.
    w.tag(6, 0);
    w.varint(span.kind + 1);
    w.tag(7, 1);
    w.time(span.startTime);
    w.tag(8, 1);
    w.time(span.endTime);
    this.attributes(9, span.attributes);
    // The counts and the status code are written even when 0, as the SDK's serializer does: the
    // same spans give the same bytes (test/tracing/otlp-protobuf.test.ts).
    w.tag(10, 0);
    w.varint(span.droppedAttributesCount);
    for (const event of span.events) {
      w.tag(11, 2);
      const e = w.begin();
      w.tag(1, 1);
      w.time(event.time);
      w.tag(2, 2);
      this.cached(event.name);
      if (event.attributes) this.attributes(3, event.attributes);
      w.tag(4, 0);
      w.varint(event.droppedAttributesCount ?? 0);
      w.end(e);
    }
    w.tag(12, 0);
    w.varint(span.droppedEventsCount);
    for (const link of span.links) this.link(link);
    w.tag(14, 0);
    w.varint(span.droppedLinksCount);
    w.tag(15, 2);
    const status = w.begin();
    if (span.status.message) {
      w.tag(2, 2);
      w.string(span.status.message);
    }
    w.tag(3, 0);
    w.varint(span.status.code);
    w.end(status);
    w.tag(16, 5);
    w.fixed32(spanFlags(context, parent?.isRemote));
    w.end(at);
  }

  private link(link: Link): void {
    const w = this.writer;
    w.tag(13, 2);
    const at = w.begin();
    w.tag(1, 2);
    w.hexId(link.context.traceId);
    w.tag(2, 2);
    w.hexId(link.context.spanId);
    const traceState = link.context.traceState?.serialize();
    if (traceState) {
      w.tag(3, 2);
      w.string(traceState);
    }
    if (link.attributes) this.attributes(4, link.attributes);
    w.tag(5, 0);
    w.varint(link.droppedAttributesCount ?? 0);
    w.tag(6, 5);
    w.fixed32(spanFlags(link.context, link.context.isRemote));
    w.end(at);
  }

  private attributes(field: number, attributes: Attributes): void {
    const w = this.writer;
    for (const key in attributes) {
      const value = attributes[key];
      if (!Object.prototype.hasOwnProperty.call(attributes, key)) continue;
      w.tag(field, 2);
      const kv = w.begin();
      w.tag(1, 2);
      this.cached(key);
      w.tag(2, 2);
      const any = w.begin();
      this.value(value, LOW_CARDINALITY.has(key));
      w.end(any);
      w.end(kv);
    }
  }

  /** One AnyValue's fields (the caller frames it). */
  private value(value: AttributeValue | null | undefined, repeats = false): void {
    const w = this.writer;
    if (typeof value === 'string') {
      w.tag(1, 2);
      if (repeats && value.length <= CACHED_VALUE_MAX_CHARS) this.cached(value);
      else w.string(value);
    } else if (typeof value === 'number') {
      if (Number.isSafeInteger(value) && value >= 0) {
        w.tag(3, 0);
        w.varint(value);
      } else if (Number.isInteger(value) && value >= -(2 ** 63) && value < 2 ** 63) {
        // A negative int64: its two's complement, ten bytes of varint.
        w.tag(3, 0);
        w.ensure(10);
        let v = BigInt.asUintN(64, BigInt(value));
        while (v > 0x7fn) {
          w.buf[w.pos++] = Number(v & 0x7fn) | 0x80;
          v >>= 7n;
        }
        w.buf[w.pos++] = Number(v);
      } else {
        w.tag(4, 1);
        w.ensure(8);
        w.pos = w.buf.writeDoubleLE(value, w.pos);
      }
    } else if (typeof value === 'boolean') {
      w.tag(2, 0);
      w.varint(value ? 1 : 0);
    } else if (Array.isArray(value)) {
      w.tag(5, 2);
      const array = w.begin();
      for (const item of value) {
        w.tag(1, 2);
        const any = w.begin();
        this.value(item);
        w.end(any);
      }
      w.end(array);
    }
  }

  /** A string whose encoding is kept: a key, a span name, a short value. */
  private cached(text: string): void {
    let bytes = this.strings.get(text);
    if (bytes === undefined) {
      if (this.strings.size >= CACHE_MAX) this.strings.clear();
      const utf8 = Buffer.from(text, 'utf8');
      bytes = Buffer.allocUnsafe(varintSize(utf8.length) + utf8.length);
      let v = utf8.length;
      let p = 0;
      while (v > 0x7f) {
        bytes[p++] = (v % 0x80) | 0x80;
        v = Math.floor(v / 0x80);
      }
      bytes[p++] = v;
      utf8.copy(bytes, p);
      this.strings.set(text, bytes);
    }
    this.writer.raw(bytes);
  }

  private once(key: object, make: () => Buffer): Buffer {
    let bytes = this.encoded.get(key);
    if (bytes === undefined) {
      bytes = make();
      this.encoded.set(key, bytes);
    }
    return bytes;
  }

  /** A message written apart (resource, scope), with its length in front. */
  private framed(write: () => void): Buffer {
    const w = this.writer;
    const start = w.pos;
    const at = w.begin();
    write();
    w.end(at);
    const bytes = Buffer.from(w.buf.subarray(start, w.pos));
    w.pos = start;
    return bytes;
  }

  private resourceBytes(resource: ReadableSpan['resource']): Buffer {
    return this.framed(() => {
      this.attributes(1, resource.attributes);
      this.writer.tag(2, 0);
      this.writer.varint(0);
    });
  }

  private scopeBytes(scope: ReadableSpan['instrumentationScope']): Buffer {
    return this.framed(() => {
      const w = this.writer;
      w.tag(1, 2);
      w.string(scope.name);
      if (scope.version) {
        w.tag(2, 2);
        w.string(scope.version);
      }
    });
  }
}

function spanFlags(context: SpanContext, parentIsRemote: boolean | undefined): number {
  return (context.traceFlags & 0xff) | SPAN_FLAGS_HAS_IS_REMOTE | (parentIsRemote ? SPAN_FLAGS_IS_REMOTE : 0);
}

function groupByResourceAndScope(spans: readonly ReadableSpan[]) {
  const resources = new Map<ReadableSpan['resource'], Map<ReadableSpan['instrumentationScope'], ReadableSpan[]>>();
  for (const span of spans) {
    let scopes = resources.get(span.resource);
    if (!scopes) resources.set(span.resource, (scopes = new Map()));
    let list = scopes.get(span.instrumentationScope);
    if (!list) scopes.set(span.instrumentationScope, (list = []));
    list.push(span);
  }
  return resources;
}
