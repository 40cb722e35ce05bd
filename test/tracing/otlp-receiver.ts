import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Test } from 'tap';

// A collector's OTLP/HTTP trace endpoint on 127.0.0.1: takes POST /v1/traces in protobuf
// (application/x-protobuf) or JSON (application/json), keeps every raw payload (for grepping),
// and decodes the spans. The protobuf decoder below reads the wire format by the field numbers of
// opentelemetry-proto (collector/trace/v1, trace/v1, common/v1, resource/v1): the 2.x exporter
// encodes with a writer of its own and ships no .proto definitions to decode with.

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  /** 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  attributes: Record<string, unknown>;
  links: Array<{ traceId: string; spanId: string }>;
  /** 0 unset, 1 ok, 2 error. */
  statusCode: number;
  /** Nanoseconds since 1970. */
  startTimeUnixNano: bigint;
  endTimeUnixNano: bigint;
  resource: Record<string, unknown>;
  /** How it arrived. */
  encoding: 'protobuf' | 'json';
}

export interface OtlpReceiver {
  /** Base URL, for OTEL_EXPORTER_OTLP_ENDPOINT. */
  url: string;
  spans: ReceivedSpan[];
  /** Every request body as it arrived. */
  payloads: Buffer[];
  /** Content types seen. */
  contentTypes: string[];
}

export async function startOtlpReceiver(t: Test): Promise<OtlpReceiver> {
  const receiver: OtlpReceiver = { url: '', spans: [], payloads: [], contentTypes: [] };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const type = String(req.headers['content-type'] ?? '');
      receiver.payloads.push(body);
      receiver.contentTypes.push(type);
      try {
        if (req.url !== '/v1/traces' || req.method !== 'POST') throw new Error(`unexpected ${req.method} ${req.url}`);
        if (type.startsWith('application/x-protobuf')) receiver.spans.push(...decodeProtobuf(body));
        else if (type.startsWith('application/json')) receiver.spans.push(...decodeJson(JSON.parse(body.toString('utf8'))));
        else throw new Error(`unexpected content type ${type}`);
        res.writeHead(200, { 'content-type': type }).end(type.startsWith('application/json') ? '{}' : undefined);
      } catch (err) {
        res.writeHead(400).end(String(err));
      }
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  t.teardown(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return receiver;
}

// --- JSON (OTLP/HTTP JSON: ids as hex, kinds as numbers) ---

type JsonValue = { stringValue?: string; boolValue?: boolean; intValue?: number | string; doubleValue?: number; arrayValue?: { values?: JsonValue[] } };

function jsonValue(v: JsonValue): unknown {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.arrayValue !== undefined) return (v.arrayValue.values ?? []).map(jsonValue);
  return undefined;
}

const jsonAttributes = (list: Array<{ key: string; value: JsonValue }> = []) => Object.fromEntries(list.map((a) => [a.key, jsonValue(a.value)]));

function decodeJson(request: any): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const rs of request.resourceSpans ?? []) {
    const resource = jsonAttributes(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        spans.push({
          traceId: s.traceId,
          spanId: s.spanId,
          parentSpanId: s.parentSpanId ?? '',
          name: s.name,
          kind: s.kind,
          attributes: jsonAttributes(s.attributes),
          links: (s.links ?? []).map((l: any) => ({ traceId: l.traceId, spanId: l.spanId })),
          statusCode: s.status?.code ?? 0,
          startTimeUnixNano: BigInt(s.startTimeUnixNano ?? 0),
          endTimeUnixNano: BigInt(s.endTimeUnixNano ?? 0),
          resource,
          encoding: 'json',
        });
      }
    }
  }
  return spans;
}

// --- protobuf wire format ---

class Reader {
  pos = 0;
  constructor(private readonly buf: Uint8Array) {}
  done(): boolean {
    return this.pos >= this.buf.length;
  }
  varint(): number {
    let result = 0;
    for (let shift = 0; ; shift += 7) {
      if (this.pos >= this.buf.length) throw new Error('truncated varint');
      const b = this.buf[this.pos++]!;
      result += (b & 0x7f) * 2 ** shift;
      if ((b & 0x80) === 0) return result;
    }
  }
  bytes(): Uint8Array {
    const len = this.varint();
    if (this.pos + len > this.buf.length) throw new Error('truncated field');
    const out = this.buf.subarray(this.pos, this.pos + len);
    this.pos += len;
    return out;
  }
  fixed64(): bigint {
    const view = new DataView(this.buf.buffer, this.buf.byteOffset + this.pos, 8);
    this.pos += 8;
    return view.getBigUint64(0, true);
  }
  double(): number {
    const view = new DataView(this.buf.buffer, this.buf.byteOffset + this.pos, 8);
    this.pos += 8;
    return view.getFloat64(0, true);
  }
  skip(wire: number): void {
    if (wire === 0) this.varint();
    else if (wire === 1) this.pos += 8;
    else if (wire === 2) this.bytes();
    else if (wire === 5) this.pos += 4;
    else throw new Error(`unexpected wire type ${wire}`);
  }
  /** Calls on(field, wire) for each field of this message; on returns false to have it skipped. */
  fields(on: (field: number, wire: number) => boolean): void {
    while (!this.done()) {
      const tag = this.varint();
      const field = Math.floor(tag / 8);
      const wire = tag & 7;
      if (!on(field, wire)) this.skip(wire);
    }
  }
}

const text = (b: Uint8Array) => Buffer.from(b).toString('utf8');
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/** common.v1.AnyValue: 1 string, 2 bool, 3 int, 4 double, 5 array (ArrayValue: 1 values). */
function anyValue(b: Uint8Array): unknown {
  let value: unknown;
  const r = new Reader(b);
  r.fields((field, wire) => {
    if (field === 1 && wire === 2) value = text(r.bytes());
    else if (field === 2 && wire === 0) value = r.varint() === 1;
    else if (field === 3 && wire === 0) value = r.varint();
    else if (field === 4 && wire === 1) value = r.double();
    else if (field === 5 && wire === 2) {
      const values: unknown[] = [];
      const a = new Reader(r.bytes());
      a.fields((f, w) => (f === 1 && w === 2 ? (values.push(anyValue(a.bytes())), true) : false));
      value = values;
    } else return false;
    return true;
  });
  return value;
}

/** common.v1.KeyValue: 1 key, 2 value. */
function keyValue(b: Uint8Array): [string, unknown] {
  let key = '';
  let value: unknown;
  const r = new Reader(b);
  r.fields((field, wire) => {
    if (field === 1 && wire === 2) key = text(r.bytes());
    else if (field === 2 && wire === 2) value = anyValue(r.bytes());
    else return false;
    return true;
  });
  return [key, value];
}

/** trace.v1.Span: 1 trace_id, 2 span_id, 4 parent_span_id, 5 name, 6 kind, 7 and 8 start and end (fixed64), 9 attributes, 13 links, 15 status. */
function span(b: Uint8Array, resource: Record<string, unknown>): ReceivedSpan {
  const s: ReceivedSpan = {
    traceId: '',
    spanId: '',
    parentSpanId: '',
    name: '',
    kind: 0,
    attributes: {},
    links: [],
    statusCode: 0,
    startTimeUnixNano: 0n,
    endTimeUnixNano: 0n,
    resource,
    encoding: 'protobuf',
  };
  const r = new Reader(b);
  r.fields((field, wire) => {
    if (wire === 2 && field === 1) s.traceId = hex(r.bytes());
    else if (wire === 2 && field === 2) s.spanId = hex(r.bytes());
    else if (wire === 2 && field === 4) s.parentSpanId = hex(r.bytes());
    else if (wire === 2 && field === 5) s.name = text(r.bytes());
    else if (wire === 0 && field === 6) s.kind = r.varint();
    else if (wire === 1 && field === 7) s.startTimeUnixNano = r.fixed64();
    else if (wire === 1 && field === 8) s.endTimeUnixNano = r.fixed64();
    else if (wire === 2 && field === 9) {
      const [k, v] = keyValue(r.bytes());
      s.attributes[k] = v;
    } else if (wire === 2 && field === 13) {
      // Link: 1 trace_id, 2 span_id.
      const link = { traceId: '', spanId: '' };
      const l = new Reader(r.bytes());
      l.fields((f, w) => {
        if (w === 2 && f === 1) link.traceId = hex(l.bytes());
        else if (w === 2 && f === 2) link.spanId = hex(l.bytes());
        else return false;
        return true;
      });
      s.links.push(link);
    } else if (wire === 2 && field === 15) {
      // Status: 3 code.
      const st = new Reader(r.bytes());
      st.fields((f, w) => (f === 3 && w === 0 ? ((s.statusCode = st.varint()), true) : false));
    } else return false;
    return true;
  });
  return s;
}

/** ExportTraceServiceRequest: 1 resource_spans (ResourceSpans: 1 resource, 2 scope_spans (ScopeSpans: 2 spans)). */
function decodeProtobuf(body: Uint8Array): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  const top = new Reader(body);
  top.fields((field, wire) => {
    if (field !== 1 || wire !== 2) return false;
    const rs = new Reader(top.bytes());
    const resource: Record<string, unknown> = {};
    const scopeSpans: Uint8Array[] = [];
    rs.fields((f, w) => {
      if (f === 1 && w === 2) {
        // Resource: 1 attributes.
        const res = new Reader(rs.bytes());
        res.fields((rf, rw) => {
          if (rf !== 1 || rw !== 2) return false;
          const [k, v] = keyValue(res.bytes());
          resource[k] = v;
          return true;
        });
      } else if (f === 2 && w === 2) scopeSpans.push(rs.bytes());
      else return false;
      return true;
    });
    for (const ss of scopeSpans) {
      const r = new Reader(ss);
      r.fields((f, w) => (f === 2 && w === 2 ? (spans.push(span(r.bytes(), resource)), true) : false));
    }
    return true;
  });
  return spans;
}

/**
 * A collector that answers every export with `status` and the body `body(req)` gives (an error page
 * that echoes the request, say). `firstExport` resolves once the first export has been answered.
 */
export async function startCollectorAnswering(
  t: Test,
  status: number,
  body: (req: http.IncomingMessage) => string | Buffer = () => '',
): Promise<{ url: string; firstExport: Promise<void> }> {
  let arrived!: () => void;
  const firstExport = new Promise<void>((resolve) => {
    arrived = resolve;
  });
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(status, { 'content-type': status === 200 ? 'application/x-protobuf' : 'text/plain' }).end(body(req));
      arrived();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, firstExport };
}
