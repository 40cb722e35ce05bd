import type { AttributeValue, Attributes, HrTime, Link, SpanContext } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';

// The spans of one export as an OTLP ExportTraceServiceRequest (opentelemetry-proto, trace/v1),
// written in one pass into a reused buffer. The SDK's serializer measures every string twice and
// copies ids byte by byte in JavaScript, which was most of tracing's exported cost per submit
// (docs/tracing.md, Cost); here repeated strings (attribute keys, span names, the resource and the
// scope, low-cardinality attributes whole) are encoded once and copied; ids, short ASCII strings
// and times are written byte by byte, long or non-ASCII strings by Buffer's native code.

/** Encodings kept at most (keys and names; a kept key's values): cleared when full. */
const CACHE_MAX = 512;
/** Attributes whose values repeat (a method, a route, a statement's name): their whole KeyValue is kept. */
const LOW_CARDINALITY = new Set(['http.request.method', 'http.route', 'url.scheme', 'db.system.name', 'db.query.summary', 'server.address', 'error.type']);
/** A longer value is never kept, whatever its key. */
const CACHED_VALUE_MAX_CHARS = 64;
const SPAN_FLAGS_HAS_IS_REMOTE = 0x100;
const SPAN_FLAGS_IS_REMOTE = 0x200;

/** A hex digit's value by its char code, -1 for any other character. */
const HEX_VALUES = (() => {
  const values = new Int8Array(128).fill(-1);
  for (let i = 0; i < 10; i++) values[0x30 + i] = i;
  for (let i = 0; i < 6; i++) values[0x61 + i] = values[0x41 + i] = 10 + i;
  return values;
})();
/** Up to this many characters a string is copied by JavaScript when it is ASCII; longer ones by Buffer's native code. */
const ASCII_COPY_MAX_CHARS = 127;
/** Up to this many bytes kept encodings are copied by JavaScript rather than by TypedArray#set. */
const BYTE_COPY_MAX = 64;

// The small writes are plain JavaScript on the buffer's bytes: Buffer#write, writeUInt32LE and
// TypedArray#set each cross into native code or validate their arguments, which cost more than
// the few bytes of an id, a key or a time they write (docs/tracing.md, Cost).
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
    const buf = this.buf;
    let v = value;
    if (v < 0x80000000) {
      while (v > 0x7f) {
        buf[this.pos++] = (v & 0x7f) | 0x80;
        v >>>= 7;
      }
    } else {
      while (v > 0x7f) {
        buf[this.pos++] = (v % 0x80) | 0x80;
        v = Math.floor(v / 0x80);
      }
    }
    buf[this.pos++] = v;
  }

  tag(field: number, wireType: number): void {
    const key = (field << 3) | wireType;
    if (key > 0x7f) return this.varint(key); // field 16 on: two bytes
    this.ensure(1);
    this.buf[this.pos++] = key;
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

  string(text: string): void {
    const n = text.length;
    if (n <= ASCII_COPY_MAX_CHARS) {
      // One length byte, then the characters as bytes while they are ASCII.
      this.ensure(n + 1);
      const buf = this.buf;
      const start = this.pos;
      let p = start + 1;
      let i = 0;
      for (; i < n; i++) {
        const c = text.charCodeAt(i);
        if (c > 0x7f) break;
        buf[p++] = c;
      }
      if (i === n) {
        buf[start] = n;
        this.pos = p;
        return;
      }
    }
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
    const buf = this.buf;
    let p = this.pos;
    let i = 0;
    for (; i < length; i++) {
      const high = HEX_VALUES[hex.charCodeAt(2 * i)] ?? -1;
      const low = HEX_VALUES[hex.charCodeAt(2 * i + 1)] ?? -1;
      if (high < 0 || low < 0) break; // not hex: never from the SDK; the rest is zeros, as Buffer#write leaves it
      buf[p++] = (high << 4) | low;
    }
    for (; i < length; i++) buf[p++] = 0;
    this.pos = p;
  }

  fixed32(value: number): void {
    this.ensure(4);
    this.le32(value >>> 0);
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
    this.le32(low % 0x100000000);
    this.le32(high >>> 0);
  }

  raw(data: Uint8Array): void {
    const n = data.length;
    this.ensure(n);
    if (n > BYTE_COPY_MAX) {
      this.buf.set(data, this.pos);
      this.pos += n;
      return;
    }
    const buf = this.buf;
    let p = this.pos;
    for (let i = 0; i < n; i++) buf[p++] = data[i]!;
    this.pos = p;
  }

  /** Four bytes, little-endian, of a value in [0, 2^32); the caller has ensured room. */
  private le32(value: number): void {
    const buf = this.buf;
    const p = this.pos;
    buf[p] = value & 0xff;
    buf[p + 1] = (value >>> 8) & 0xff;
    buf[p + 2] = (value >>> 16) & 0xff;
    buf[p + 3] = value >>> 24;
    this.pos = p + 4;
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
  /** KeyValues of LOW_CARDINALITY keys, by key and value. */
  private readonly pairs = new Map<string, Map<string, Buffer>>();
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
    const request = Buffer.allocUnsafe(w.pos);
    w.buf.copy(request, 0, 0, w.pos);
    return request;
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
      if (typeof value === 'string' && value.length <= CACHED_VALUE_MAX_CHARS && LOW_CARDINALITY.has(key)) {
        w.raw(this.cachedPair(key, value));
        continue;
      }
      this.pair(key, value);
    }
  }

  /** One KeyValue, with its length in front. */
  private pair(key: string, value: AttributeValue | undefined): void {
    const kv = this.writer.begin();
    this.pairFields(key, value);
    this.writer.end(kv);
  }

  /** A KeyValue's fields: its key and its AnyValue. */
  private pairFields(key: string, value: AttributeValue | undefined): void {
    const w = this.writer;
    w.tag(1, 2);
    this.cached(key);
    w.tag(2, 2);
    const any = w.begin();
    this.value(value);
    w.end(any);
  }

  /** A KeyValue whose value repeats (a method, a route, a statement's name), encoded once and kept. */
  private cachedPair(key: string, value: string): Buffer {
    let values = this.pairs.get(key);
    if (values === undefined) {
      if (this.pairs.size >= CACHE_MAX) this.pairs.clear();
      this.pairs.set(key, (values = new Map()));
    }
    let bytes = values.get(value);
    if (bytes === undefined) {
      if (values.size >= CACHE_MAX) values.clear();
      bytes = this.framed(() => this.pairFields(key, value));
      values.set(value, bytes);
    }
    return bytes;
  }

  /** One AnyValue's fields (the caller frames it). */
  private value(value: AttributeValue | null | undefined): void {
    const w = this.writer;
    if (typeof value === 'string') {
      w.tag(1, 2);
      w.string(value);
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
