import t from 'tap';
import { customerAttribute } from '../../src/tracing/spans.js';
import { buildTestApp } from '../helpers/app.js';
import { asciiDigits, DIGIT_ZEROS, inScript } from '../helpers/cpf.js';
import { freshDatabase } from '../helpers/database.js';
import { until } from '../events/fixtures.js';
import { startOtlpReceiver } from './otlp-receiver.js';

// What a caller writes in tracestate, and where a request id lands in a span.

const database = await freshDatabase(t);

t.test('an incoming tracestate carrying a CPF (or a secret) is not exported with the spans', async (t) => {
  const otlp = await startOtlpReceiver(t);
  const callbackSecret = 'cbsecret-0123456789abcdef';
  const gw = await buildTestApp(t, { database, env: { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf', CALLBACK_SECRET: callbackSecret } });
  const res = await gw.app.inject({
    method: 'GET',
    url: '/healthz',
    headers: {
      traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
      tracestate: `vendor=ok,cpf=529.982.247-25,bare=52998224725,tok=${callbackSecret}`,
    },
  });
  t.equal(res.statusCode, 200);
  await until(async () => {
    await gw.tracing!.flush();
    return otlp.spans.some((s) => s.name === 'GET /healthz') ? true : undefined;
  });
  const payload = Buffer.concat(otlp.payloads).toString('latin1');
  for (const secret of ['529.982.247-25', '52998224725', callbackSecret]) t.notOk(payload.includes(secret), `${secret} is in no exported payload`);
  t.ok(payload.includes('vendor=ok'), 'a harmless tracestate entry is still continued');
});

t.test('a CPF in tracestate with percent-encoded separators (encoded once or twice), or as escaped fullwidth digits, is not exported', async (t) => {
  const otlp = await startOtlpReceiver(t);
  const gw = await buildTestApp(t, { database, env: { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf' } });
  const fullwidth = (digits: string) => [...digits].map((c) => (/[0-9]/.test(c) ? encodeURIComponent(String.fromCharCode(0xff10 + Number(c))) : c)).join('');
  const planted = ['529%2E982%2E247%2D25', fullwidth('529.982.247-25'), '529%252E982%252E247%252D25', '\\uff15\\uff12\\uff19.\\uff19\\uff18\\uff12.\\uff12\\uff14\\uff17-\\uff12\\uff15'];
  const res = await gw.app.inject({
    method: 'GET',
    url: '/healthz',
    headers: {
      traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
      tracestate: `vendor=ok,enc=${planted[0]},fw=${planted[1]},dbl=${planted[2]},esc=${planted[3]}`,
    },
  });
  t.equal(res.statusCode, 200);
  await until(async () => {
    await gw.tracing!.flush();
    return otlp.spans.some((s) => s.name === 'GET /healthz') ? true : undefined;
  });
  const payload = Buffer.concat(otlp.payloads).toString('latin1');
  for (const cpf of planted) t.notOk(payload.includes(cpf), `${cpf} is in no exported payload`);
  t.ok(payload.includes('vendor=ok'), 'a harmless tracestate entry is still continued');
});

t.test('a CPF split across tracestate entries (a value, then the next vendor key) is not exported either', async (t) => {
  const otlp = await startOtlpReceiver(t);
  const gw = await buildTestApp(t, { database, env: { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf' } });
  // A vendor key may begin with digits: each entry alone holds fewer than 11, the header as continued holds 529.982.247,25.
  const res = await gw.app.inject({
    method: 'GET',
    url: '/healthz',
    headers: { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', tracestate: 'a=529.982.247,25x@v=1' },
  });
  t.equal(res.statusCode, 200);
  await until(async () => {
    await gw.tracing!.flush();
    return otlp.spans.some((s) => s.name === 'GET /healthz') ? true : undefined;
  });
  const payload = Buffer.concat(otlp.payloads).toString('latin1');
  t.notOk(payload.includes('529.982.247,25'), 'the CPF is in no exported payload, whole or across entries');
  t.equal(otlp.spans.find((s) => s.name === 'GET /healthz')!.traceId, '0af7651916cd43dd8448eb211c80319c', 'the trace is still continued');
});

t.test('the span carries the request id exactly as answered, even a UUID with a long run of digits', async (t) => {
  const otlp = await startOtlpReceiver(t);
  const gw = await buildTestApp(t, { database, env: { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' } });
  // A UUID whose digits hold no CPF (12345678901 and 23456789012 fail the check digits): a good id, kept as given.
  const id = '1f3a9c2e-1234-5678-9012-a0b1c2d3e4f5';
  const res = await gw.app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': id } });
  t.equal(res.headers['x-request-id'], id, 'the caller id is kept');
  await until(async () => {
    await gw.tracing!.flush();
    return otlp.spans.some((s) => s.name === 'GET /healthz') ? true : undefined;
  });
  const span = otlp.spans.find((s) => s.name === 'GET /healthz')!;
  t.same(span.attributes['http.request.header.x-request-id'], [id], 'the span names the same request id');
});

t.test('a CPF-shaped request id with more separators is replaced, not kept and logged', async (t) => {
  const gw = await buildTestApp(t, { database });
  for (const given of ['529...982...247...25', '529.:.982.:.247.:.25', '529---982---247---25']) {
    const res = await gw.app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': given } });
    t.not(res.headers['x-request-id'], given, `${given} is not used as the request id`);
  }
});

t.test('url.path keeps no CPF however its path is percent-encoded, and no configured secret put in the path', async (t) => {
  const otlp = await startOtlpReceiver(t);
  const callbackSecret = 'cbsecret-fedcba9876543210';
  const queryKey = 'querykey-0123456789abcdef';
  const gw = await buildTestApp(t, {
    database,
    env: { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', CALLBACK_SECRET: callbackSecret, QUERY_API_KEYS: queryKey },
  });
  const fullwidth = encodeURIComponent('９８７６５４３２１００');
  const paths = [
    '/v1/underwritings/123%2E456%2E789%2D09',
    `/v1/underwritings/${fullwidth}`,
    '/v1/underwritings/529%252E982%252E247%252D25',
    `/v1/callbacks/underwriting;token=${callbackSecret}`,
    `/v1/callbacks/underwriting&token=${callbackSecret}`,
    `/v1/callbacks/underwriting/${callbackSecret}`,
    `/v1/underwritings/cust-1;key=${queryKey}`,
  ];
  for (const url of paths) await gw.app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${queryKey}` } });
  await until(async () => {
    await gw.tracing!.flush();
    return otlp.spans.filter((s) => s.kind === 2).length >= paths.length ? true : undefined;
  });
  const payload = Buffer.concat(otlp.payloads).toString('utf8');
  for (const secret of ['123%2E456%2E789%2D09', fullwidth, '529%252E982%252E247%252D25', callbackSecret, queryKey]) {
    t.notOk(payload.includes(secret), `${secret} is in no exported payload`);
  }
  const shown = otlp.spans.filter((s) => s.kind === 2).map((s) => s.attributes['url.path']);
  t.ok(shown.includes('/v1/underwritings/[redacted]'), 'the encoded CPF is redacted');
});

t.test('request log lines: the same path rules', async (t) => {
  const { loggedRequestUrl } = await import('../../src/observability/logger.js');
  t.equal(loggedRequestUrl('/v1/underwritings/123%2E456%2E789%2D09?wait=1'), '/v1/underwritings/[redacted]?wait');
  t.equal(loggedRequestUrl('/v1/callbacks/underwriting;token=s3cr3t-value'), '/v1/callbacks/underwriting;redacted');
  t.equal(loggedRequestUrl('/v1/underwritings/cust-1'), '/v1/underwritings/cust-1', 'an ordinary path as it is');
  t.equal(loggedRequestUrl('/v1/underwritings/a%20b'), '/v1/underwritings/a%20b', 'still encoded when nothing was revealed');
  t.equal(loggedRequestUrl('/v1/x/529%2E982%2E247%2D25/%'), '/v1/x/[redacted]/%', 'a malformed escape elsewhere does not keep the CPF encoded');
  t.equal(
    loggedRequestUrl('/v1/underwritings/529%2E982%2E247%2D25%3Ftoken%3Dabc'),
    '/v1/underwritings/[redacted]%3Ftoken=abc',
    'a decoded ? stays encoded: no value reads as a query',
  );
});

t.test('url.path, tracestate and gateway.customer_uuid keep no CPF written with four or more separators or in the digits of another script', async (t) => {
  const otlp = await startOtlpReceiver(t);
  const gw = await buildTestApp(t, { database, env: { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' } });
  const paths = [
    '/v1/underwritings/cust-529-_-_982-_-_247-_-_25',
    '/v1/nothing/529....982....247....25',
    '/v1/nothing/529%2E%2E%2E%2E982%2E%2E%2E%2E247%2D%2D%2D%2D25',
    `/v1/nothing/${encodeURIComponent(inScript('529.982.247-25', DIGIT_ZEROS.arabicIndic))}`,
    `/v1/nothing/${encodeURIComponent(inScript('52998224725', DIGIT_ZEROS.devanagari))}`,
  ];
  const tracestate = `vendor=ok,sep=529....982....247....25,ar=${encodeURIComponent(inScript('52998224725', DIGIT_ZEROS.arabicIndic))}`;
  for (const url of paths) {
    await gw.app.inject({ method: 'GET', url, headers: { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', tracestate } });
  }
  await until(async () => {
    await gw.tracing!.flush();
    return otlp.spans.filter((s) => s.kind === 2).length >= paths.length ? true : undefined;
  });
  const shown = otlp.spans.filter((s) => s.kind === 2).map((s) => s.attributes['url.path']);
  t.same(shown, ['/v1/underwritings/cust-[redacted]', ...paths.slice(1).map(() => '/v1/nothing/[redacted]')]);
  const payload = Buffer.concat(otlp.payloads).toString('utf8');
  t.notMatch(asciiDigits(decodeURIComponent(payload)).replace(/\D/g, ''), '52998224725', 'in no exported payload (nor its tracestate), in any encoding or script');
  t.ok(payload.includes('vendor=ok'), 'a harmless tracestate entry is still continued');

  for (const customerUuid of ['529-_-_982-_-_247-_-_25', 'cust_529____982____247____25', inScript('52998224725', DIGIT_ZEROS.arabicIndic)]) {
    t.same(customerAttribute(customerUuid), { 'gateway.customer_uuid': customerUuid.startsWith('cust') ? 'cust_[redacted]' : '[redacted]' }, customerUuid);
  }
});
