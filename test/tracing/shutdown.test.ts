import t from 'tap';
import { startGatewayProcess } from '../helpers/gateway-process.js';
import { httpRequest } from '../helpers/http.js';
import { startOtlpReceiver } from './otlp-receiver.js';

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
