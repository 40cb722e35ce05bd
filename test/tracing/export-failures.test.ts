import t from 'tap';
import { startGatewayProcess } from '../helpers/gateway-process.js';
import { httpRequest } from '../helpers/http.js';
import { startCollectorAnswering } from './otlp-receiver.js';

// What the log says when the collector refuses spans: the SDK's error, with the collector's answer.

t.test("a refused export's warn names no OTLP header value, and a collector's error page is not copied whole", async (t) => {
  const apiKey = 'otlpkey-0a1b2c3d4e5f6a7b8c9d';
  const token = 'otlptoken-9d8c7b6a5f4e3d2c1b0a';
  // An error page that echoes the request's headers (some proxies' do), padded to 200 kB.
  const collector = await startCollectorAnswering(t, 400, (req) => `refused: ${JSON.stringify(req.headers)}\n${'x'.repeat(200_000)}`);
  const { server, base } = await startGatewayProcess(t, {
    OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
    // The SDK decodes values: the collector receives "Bearer <token>".
    OTEL_EXPORTER_OTLP_HEADERS: `x-api-key=${apiKey},authorization=Bearer%20${token}`,
    OTEL_BSP_SCHEDULE_DELAY: '10',
  });
  t.equal((await httpRequest(`${base}/healthz`)).status, 200);
  await collector.firstExport;
  const warn = await server.waitForLog((l) => l.component === 'opentelemetry' && l.level === 'warn');
  t.match(warn.msg, /Bad Request/, 'the refusal is said');
  const line = server.stdout.find((l) => l.includes('"component":"opentelemetry"'))!;
  t.ok(line.length < 10_000, `the line is bounded (${line.length} characters)`);
  const all = [...server.stdout, ...server.stderr].join('\n');
  t.notOk(all.includes(apiKey), 'the API key is in no log line');
  t.notOk(all.includes(token), 'the bearer token is in no log line');
});

t.test("the SDK's own words reach the warn: a collector's partial success names what it rejected and why", async (t) => {
  // ExportTraceServiceResponse { partial_success { rejected_spans: 5, error_message } }, as protobuf.
  const why = Buffer.from('quota exceeded for this tenant');
  const partial = Buffer.concat([Buffer.from([0x08, 0x05, 0x12, why.length]), why]);
  const answer = Buffer.concat([Buffer.from([0x0a, partial.length]), partial]);
  const collector = await startCollectorAnswering(t, 200, () => answer);
  const { server, base } = await startGatewayProcess(t, { OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_BSP_SCHEDULE_DELAY: '10' });
  t.equal((await httpRequest(`${base}/healthz`)).status, 200);
  await collector.firstExport;
  const warn = await server.waitForLog((l) => l.component === 'opentelemetry' && l.level === 'warn');
  t.match(warn.msg, /Partial Success/, 'what happened');
  t.match(warn.msg, /quota exceeded for this tenant/, "and the collector's reason, not only the SDK component's name");
});
