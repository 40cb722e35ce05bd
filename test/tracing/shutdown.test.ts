import t from 'tap';
import { startGatewayProcess } from '../helpers/gateway-process.js';
import { httpRequest } from '../helpers/http.js';
import { startOtlpReceiver, startCollectorAnswering } from './otlp-receiver.js';

t.test('at SIGTERM the gateway exports the spans it still holds before it exits', async (t) => {
  const otlp = await startOtlpReceiver(t);
  // Far longer than the test: only the shutdown's flush can send the span.
  const { server, base } = await startGatewayProcess(t, { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_BSP_SCHEDULE_DELAY: '600000' });
  t.equal((await httpRequest(`${base}/healthz`)).status, 200);
  t.same(otlp.spans, [], 'nothing exported yet');
  server.child.kill('SIGTERM');
  const { code } = await server.exited;
  t.equal(code, 0);
  t.match(otlp.spans, [{ name: 'GET /healthz', kind: 2, resource: { 'service.name': 'underwriting-gateway' } }]);
});

t.test('a collector that refuses the last spans (401: its key expired) is logged, and the shutdown still succeeds', async (t) => {
  const collector = await startCollectorAnswering(t, 401);
  const { server, base } = await startGatewayProcess(t, { OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_BSP_SCHEDULE_DELAY: '600000' });
  t.equal((await httpRequest(`${base}/healthz`)).status, 200);
  server.child.kill('SIGTERM');
  const { code } = await server.exited;
  await collector.firstExport;
  t.equal(code, 0, 'exit 0: everything the gateway itself does finished');
  const lines = server.stdout.map((line) => JSON.parse(line) as Record<string, unknown>);
  t.ok(lines.some((l) => l.level === 'warn' && l.component === 'opentelemetry'), 'the refused export is a warn of the opentelemetry component');
  t.notOk(lines.some((l) => l.msg === 'error while shutting down'), 'not an error of the shutdown');
  t.ok(lines.some((l) => l.msg === 'stopped'), 'stopped as usual');
});
