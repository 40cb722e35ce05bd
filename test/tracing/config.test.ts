import t from 'tap';
import { loadConfig } from '../../src/config/config.js';
import { configProblems } from '../helpers/config.js';

const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector.internal:4318/' };

t.test('tracing is off unless an OTLP endpoint is configured', async (t) => {
  t.equal(loadConfig({}).tracing, undefined);
  t.same(loadConfig(endpoint).tracing, { tracesUrl: 'http://collector.internal:4318/v1/traces', protocol: 'http/protobuf', serviceName: undefined });
});

t.test('the traces endpoint is used as given, and the protocol and service name are honoured', async (t) => {
  const config = loadConfig({
    ...endpoint,
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://traces.internal/custom/path',
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_SERVICE_NAME: 'ugw-eu',
  });
  t.same(config.tracing, { tracesUrl: 'https://traces.internal/custom/path', protocol: 'http/json', serviceName: 'ugw-eu' });
  t.equal(loadConfig({ ...endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf' }).tracing?.protocol, 'http/protobuf');
});

t.test('OTEL_TRACES_EXPORTER=none and OTEL_SDK_DISABLED=true turn it off even with an endpoint', async (t) => {
  t.equal(loadConfig({ ...endpoint, OTEL_TRACES_EXPORTER: 'none' }).tracing, undefined);
  t.equal(loadConfig({ ...endpoint, OTEL_SDK_DISABLED: 'true' }).tracing, undefined);
  t.not(loadConfig({ ...endpoint, OTEL_TRACES_EXPORTER: 'otlp' }).tracing, undefined);
});

t.test('a protocol, exporter or endpoint the gateway cannot honour stops it, naming the variable', async (t) => {
  t.same(configProblems(loadConfig, { ...endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }), [
    'OTEL_EXPORTER_OTLP_PROTOCOL: must be http/protobuf or http/json (OTLP over gRPC is not supported)',
  ]);
  t.same(configProblems(loadConfig, { ...endpoint, OTEL_TRACES_EXPORTER: 'zipkin' }), ['OTEL_TRACES_EXPORTER: must be otlp or none']);
  t.match(configProblems(loadConfig, { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'collector:4318' }), [/^OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: must be an http\(s\) URL/]);
});
