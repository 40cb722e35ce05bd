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

t.test('a sampler the SDK does not know, or a ratio outside 0 to 1, stops the start instead of exporting every trace', async (t) => {
  for (const sampler of ['parentbased_traceidratio', 'always_off', '   ']) {
    t.doesNotThrow(() => loadConfig({ ...endpoint, OTEL_TRACES_SAMPLER: sampler, OTEL_TRACES_SAMPLER_ARG: '0.1' }), sampler);
  }
  t.same(configProblems(loadConfig, { ...endpoint, OTEL_TRACES_SAMPLER: 'traceidratio_parentbased' }), [
    'OTEL_TRACES_SAMPLER: must be one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio',
  ]);
  t.same(configProblems(loadConfig, { OTEL_TRACES_SAMPLER: 'jaeger_remote' }).length, 1, 'checked with tracing off too, as the protocol is');
  // The SDK (and root-ids.ts) match the name untrimmed: padded, it would be the default, every trace kept.
  t.same(configProblems(loadConfig, { ...endpoint, OTEL_TRACES_SAMPLER: ' traceidratio ' }).length, 1, 'a padded name is refused');
  for (const ratio of ['10', '-0.1', '10%', 'half']) {
    t.same(configProblems(loadConfig, { ...endpoint, OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: ratio }), [
      'OTEL_TRACES_SAMPLER_ARG: must be a number from 0 to 1 (the share of traces a ratio sampler keeps)',
    ], ratio);
  }
  for (const unset of ['', '  ']) t.equal(loadConfig({ ...endpoint, OTEL_TRACES_SAMPLER_ARG: unset }).tracing?.protocol, 'http/protobuf', 'blank is unset');
});
