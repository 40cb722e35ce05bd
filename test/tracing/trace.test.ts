import { randomBytes } from 'node:crypto';
import t, { type Test } from 'tap';
import { SANDBOX_DEFAULT_CPFS } from '../../src/sandbox/config.js';
import { buildTestApp, listen, type TestApp } from '../helpers/app.js';
import { anotherConnection, freshDatabase } from '../helpers/database.js';
import { httpRequest } from '../helpers/http.js';
import { customer, insertRequest, resultBody } from '../callbacks/fixtures.js';
import { until, webhookSecret } from '../events/fixtures.js';
import { startReceiver } from '../events/receiver.js';
import { PARTNER_TOKEN, startSandbox } from '../sandbox/helpers.js';
import { startFakeProvider } from '../submissions/provider.js';
import { validRequest } from '../submissions/fixtures.js';
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from './otlp-receiver.js';

// Spans go over OTLP/HTTP, as the SDK sends them, to a receiver in the test that decodes the real
// payload: protobuf from one instance, JSON from the other.

const SERVER = 2;
const CLIENT = 3;
const hex = (bytes: number) => randomBytes(bytes).toString('hex');
const traceEnv = (otlp: OtlpReceiver, protocol: 'http/protobuf' | 'http/json', service: string) => ({
  OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
  OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
  OTEL_SERVICE_NAME: service,
});

/** Flushes the instances' SDKs until the receiver holds a span matching each predicate. */
async function exported(otlp: OtlpReceiver, apps: TestApp[], wanted: Array<(s: ReceivedSpan) => boolean>): Promise<void> {
  await until(async () => {
    for (const { tracing } of apps) await tracing!.flush();
    return wanted.every((w) => otlp.spans.some(w)) ? true : undefined;
  });
}

const one = (t: Test, spans: ReceivedSpan[], predicate: (s: ReceivedSpan) => boolean, what: string): ReceivedSpan => {
  const found = spans.filter(predicate);
  t.equal(found.length, 1, `one ${what}`);
  return found[0]!;
};

const database = await freshDatabase(t);

t.test('one underwriting is one trace: submit, its statements and provider call, the callback on another instance, every delivery attempt', async (t) => {
  const otlp = await startOtlpReceiver(t);
  const callbackSecret = `cbsecret-${hex(8)}`;
  const queryKey = `querykey-${hex(8)}`;
  const hookPassword = `hookpass${hex(6)}`;
  const hookQuerySecret = `hookquery${hex(6)}`;
  const signingSecret = webhookSecret();
  const cpf = SANDBOX_DEFAULT_CPFS.approve;

  // The receiver of pushed events refuses the first attempt: two attempts, both in the trace.
  const hooks = await startReceiver(t, (_r, n) => (n === 1 ? 503 : 200));
  const hookUrl = hooks.url.replace('http://', `http://hookuser:${hookPassword}@`) + `/hooks?key=${hookQuerySecret}`;

  // Instance B receives the callback and pushes; it exports JSON.
  const b = await buildTestApp(t, {
    database: await anotherConnection(t, database),
    env: {
      ...traceEnv(otlp, 'http/json', 'gateway-b'),
      CALLBACK_SECRET: callbackSecret,
      QUERY_API_KEYS: queryKey,
      EVENT_WEBHOOK_URLS: hookUrl,
      EVENT_WEBHOOK_SECRET: signingSecret,
      // Exactly two attempts are asserted: a prompt answer read late on a loaded host must not be a timeout (and a third).
      EVENT_WEBHOOK_TIMEOUT_MS: '10000',
    },
  });
  const bBase = await listen(b.app);

  // The sandbox provider over real HTTP, behind a front that records what the gateway sent it.
  const sandbox = await startSandbox(t, {}, { callbackUrl: () => `${bBase}/v1/callbacks/underwriting?token=${callbackSecret}` });
  const front = await startFakeProvider(t, async (received, res) => {
    const forwarded = await httpRequest(`${sandbox.base}${received.url}`, {
      body: received.text,
      headers: { 'content-type': 'application/json', 'x-partner-auth': String(received.headers['x-partner-auth']) },
    });
    res.writeHead(forwarded.status, { 'content-type': 'application/json' }).end(forwarded.text);
  });

  // Instance A takes the submit; it exports protobuf.
  const a = await buildTestApp(t, {
    database,
    // A synchronous submit through two hops (the front, then the sandbox): the tests' 2 s default was no margin on a loaded host.
    env: { ...traceEnv(otlp, 'http/protobuf', 'gateway-a'), PROVIDER_BASE_URL: front.url, PARTNER_TOKEN, UPSTREAM_TIMEOUT_MS: '15000' },
  });
  const cust = customer('traced');
  const incoming = { traceId: hex(16), spanId: hex(8) };
  const submitted = await a.app.inject({
    method: 'POST',
    url: '/v1/underwritings',
    headers: { 'content-type': 'application/json', traceparent: `00-${incoming.traceId}-${incoming.spanId}-01`, 'x-request-id': 'trace-e2e-1' },
    payload: validRequest({ customerUuid: cust, cpf, srd: { ...validRequest().srd!, address: { street: `Rua ${cpf}`, city: 'Recife', state: 'PE' } } }),
  });
  t.equal(submitted.statusCode, 202);

  const attempts = await hooks.count(2);
  t.same(attempts.map((r) => r.json.type), ['underwriting.completed', 'underwriting.completed']);
  // A read with a CPF in its path and a secret in its query: neither may reach a span.
  const read = await httpRequest(`${bBase}/v1/underwritings/${cpf}?wait=0&token=${callbackSecret}`, { headers: { authorization: `Bearer ${queryKey}` } });
  t.equal(read.status, 400, 'a CPF is no customerUuid');

  const isSubmit = (s: ReceivedSpan) => s.kind === SERVER && s.name === 'POST /v1/underwritings';
  const isCallback = (s: ReceivedSpan) => s.kind === SERVER && s.name === 'POST /v1/callbacks/underwriting';
  const isAttempt = (s: ReceivedSpan) => s.kind === CLIENT && s.name === 'POST' && s.attributes['gateway.event.id'] === attempts[0]!.json.id;
  await exported(otlp, [a, b], [
    isSubmit,
    isCallback,
    (s) => s.name === 'record_results',
    (s) => isAttempt(s) && s.attributes['http.response.status_code'] === 200,
    (s) => isAttempt(s) && s.attributes['http.response.status_code'] === 503,
    (s) => s.kind === SERVER && s.name === 'GET /v1/underwritings/:customerUuid',
  ]);
  const spans = otlp.spans;
  t.ok(otlp.contentTypes.includes('application/x-protobuf') && otlp.contentTypes.includes('application/json'), 'both encodings arrived');

  // The submit continues the incoming traceparent.
  const submit = one(t, spans, isSubmit, 'submit server span');
  t.match(submit, { traceId: incoming.traceId, parentSpanId: incoming.spanId, encoding: 'protobuf', resource: { 'service.name': 'gateway-a' } });
  t.match(submit.attributes, { 'http.request.method': 'POST', 'http.route': '/v1/underwritings', 'http.response.status_code': 202 });
  const trace = submit.traceId;
  const childrenOf = (parent: ReceivedSpan) => spans.filter((s) => s.traceId === trace && s.parentSpanId === parent.spanId);

  // Its statements and its provider call are its children.
  const names = childrenOf(submit).map((s) => s.name);
  t.ok(names.includes('insert_submitting') && names.includes('mark_submitted'), `the submit's statements: ${names.join(', ')}`);
  const call = one(t, spans, (s) => s.kind === CLIENT && s.name === 'POST /api/partner/credit/cards/underwritings', 'provider call');
  t.match(call, { traceId: trace, parentSpanId: submit.spanId });
  t.match(call.attributes, { 'http.request.method': 'POST', 'http.response.status_code': 202, 'url.full': `${front.url}/api/partner/credit/cards/underwritings` });
  const [sent] = front.received;
  t.equal(sent!.headers.traceparent, `00-${trace}-${call.spanId}-01`, 'the provider got the call span as its parent');
  t.equal(sent!.headers['x-request-id'], 'trace-e2e-1', 'and the submit’s X-Request-Id');

  // The callback, on B, brought no traceparent: its server span is the submit's child, in the underwriting's trace.
  const callback = one(t, spans, isCallback, 'callback server span');
  t.match(callback, { traceId: trace, parentSpanId: submit.spanId, encoding: 'json', resource: { 'service.name': 'gateway-b' } });
  t.match(callback.attributes, { 'http.route': '/v1/callbacks/underwriting', 'http.response.status_code': 200, 'gateway.customer_uuid': cust });
  t.same(callback.links, [], 'nothing to link: it is in the trace');
  t.ok(callback.startTimeUnixNano < callback.endTimeUnixNano, 'it spans the callback, from its arrival');
  const record = one(t, spans, (s) => s.name === 'record_results', 'callback statement');
  t.match(record, { traceId: trace, parentSpanId: callback.spanId, kind: CLIENT });
  t.ok(record.startTimeUnixNano >= callback.startTimeUnixNano && record.endTimeUnixNano <= callback.endTimeUnixNano, 'the statement within the callback');
  t.notOk(spans.some((s) => s.name === 'underwriting.callback'), 'no separate step');

  // Every delivery attempt continues the underwriting's trace and says so on the request.
  const tried = spans.filter(isAttempt);
  t.equal(tried.length, 2, 'two attempts, two client spans');
  for (const [i, attempt] of tried.entries()) {
    t.match(attempt, { traceId: trace, parentSpanId: submit.spanId, kind: CLIENT }, `attempt ${i + 1} is in the trace`);
    const request = attempts.find((r) => r.headers.traceparent === `00-${trace}-${attempt.spanId}-01`);
    t.ok(request, `attempt ${i + 1} carried its own span as traceparent`);
    t.equal(request?.headers['x-request-id'], 'trace-e2e-1', `attempt ${i + 1} carried the submit's X-Request-Id`);
  }
  t.match(tried.find((s) => s.attributes['http.response.status_code'] === 503), { statusCode: 2, attributes: { 'error.type': '503' } });
  t.match(tried.find((s) => s.attributes['http.response.status_code'] === 200), { attributes: { 'http.request.resend_count': 1 } });

  // No CPF (in any form), token or secret in any payload, protobuf or JSON.
  const planted = {
    cpf,
    'formatted cpf': `${cpf.slice(0, 3)}.${cpf.slice(3, 6)}.${cpf.slice(6, 9)}-${cpf.slice(9)}`,
    'partner token': PARTNER_TOKEN,
    'callback secret': callbackSecret,
    'query key': queryKey,
    'webhook URL password': hookPassword,
    'webhook URL query secret': hookQuerySecret,
    'webhook signing secret': signingSecret.slice('whsec_'.length),
  };
  const payloads = Buffer.concat(otlp.payloads);
  t.ok(payloads.length > 0);
  for (const [what, secret] of Object.entries(planted)) t.equal(payloads.indexOf(secret), -1, `no ${what} in the exported spans`);
  const readSpan = one(t, spans, (s) => s.name === 'GET /v1/underwritings/:customerUuid', 'read span');
  t.match(readSpan.attributes, { 'url.path': '/v1/underwritings/[redacted]', 'url.query': 'wait&token' });
  t.match(
    tried[0]!.attributes['url.full'],
    new RegExp(`^${hooks.url}/hooks\\?key=redacted$`),
    'the webhook URL is shown without userinfo or query value',
  );
});

t.test('an incoming traceparent is continued on every route, a refusal and an unknown route included', async (t) => {
  const otlp = await startOtlpReceiver(t);
  const gw = await buildTestApp(t, { database, env: { ...traceEnv(otlp, 'http/json', 'gateway'), SUBMIT_ALLOWED_IPS: '10.9.9.9/32' } });
  const sent = [
    { method: 'GET', url: '/healthz', name: 'GET /healthz', status: 200 },
    { method: 'GET', url: '/nowhere', name: 'GET', status: 404 },
    { method: 'POST', url: '/v1/underwritings', name: 'POST /v1/underwritings', status: 403 },
  ] as const;
  const parents = sent.map(() => ({ traceId: hex(16), spanId: hex(8) }));
  for (const [i, r] of sent.entries()) {
    const res = await gw.app.inject({
      method: r.method,
      url: r.url,
      headers: { traceparent: `00-${parents[i]!.traceId}-${parents[i]!.spanId}-01`, 'content-type': 'application/json' },
      ...(r.method === 'POST' ? { payload: validRequest() } : {}),
    });
    t.equal(res.statusCode, r.status);
  }
  await exported(otlp, [gw], parents.map((p) => (s: ReceivedSpan) => s.traceId === p.traceId));
  for (const [i, r] of sent.entries()) {
    const span = one(t, otlp.spans, (s) => s.traceId === parents[i]!.traceId, r.name);
    t.match(span, { name: r.name, kind: SERVER, parentSpanId: parents[i]!.spanId, attributes: { 'http.response.status_code': r.status } });
  }
});

t.test('with tracing off no span is made, and the provider and the pushed events still get the X-Request-Id', async (t) => {
  const provider = await startFakeProvider(t);
  const hooks = await startReceiver(t);
  const gw = await buildTestApp(t, {
    database,
    env: { PROVIDER_BASE_URL: provider.url, EVENT_WEBHOOK_URLS: hooks.url, EVENT_WEBHOOK_SECRET: webhookSecret(), EVENT_WEBHOOK_TIMEOUT_MS: '10000' },
  });
  t.equal(gw.tracing, undefined, 'no SDK started');
  const cust = customer('untraced');
  const res = await gw.app.inject({
    method: 'POST',
    url: '/v1/underwritings',
    headers: { 'content-type': 'application/json', 'x-request-id': 'untraced-1', traceparent: `00-${hex(16)}-${hex(8)}-01` },
    payload: validRequest({ customerUuid: cust }),
  });
  t.equal(res.statusCode, 202);
  t.equal(provider.received[0]!.headers['x-request-id'], 'untraced-1');
  t.equal(provider.received[0]!.headers.traceparent, undefined, 'no traceparent is made up');
  const stored = await database.db.selectFrom('underwriting_requests').select(['traceparent', 'x_request_id']).where('customer_uuid', '=', cust).executeTakeFirstOrThrow();
  t.same(stored, { traceparent: null, x_request_id: 'untraced-1' });
  const callback = await gw.app.inject({
    method: 'POST',
    url: '/v1/callbacks/underwriting',
    headers: { 'content-type': 'application/json' },
    payload: resultBody(cust, { started: new Date().toISOString() }),
  });
  t.equal(callback.statusCode, 200);
  const [pushed] = await hooks.waitFor((r) => r.json.data.customerUuid === cust);
  t.equal(pushed!.headers['x-request-id'], 'untraced-1', "the pushed event carries the submit's X-Request-Id");
  t.equal(pushed!.headers.traceparent, undefined);
});

t.test("a callback that brings a traceparent continues it: the underwriting's trace gets an underwriting.callback step, and each links to the other", async (t) => {
  const otlp = await startOtlpReceiver(t);
  const gw = await buildTestApp(t, { database, env: traceEnv(otlp, 'http/json', 'gateway') });
  const cust = customer('provider-traced');
  const requestId = await insertRequest(database.db, { customerUuid: cust, status: 'submitted' });
  const submit = { traceId: hex(16), spanId: hex(8) };
  await database.db.updateTable('underwriting_requests').set({ traceparent: `00-${submit.traceId}-${submit.spanId}-01` }).where('id', '=', requestId).execute();
  const provider = { traceId: hex(16), spanId: hex(8) };
  const res = await gw.app.inject({
    method: 'POST',
    url: '/v1/callbacks/underwriting',
    headers: { 'content-type': 'application/json', traceparent: `00-${provider.traceId}-${provider.spanId}-01` },
    payload: resultBody(cust, { started: new Date().toISOString() }),
  });
  t.equal(res.statusCode, 200);
  const isCallback = (s: ReceivedSpan) => s.kind === SERVER && s.traceId === provider.traceId;
  await exported(otlp, [gw], [isCallback, (s) => s.name === 'underwriting.callback', (s) => s.name === 'record_results']);
  const callback = one(t, otlp.spans, isCallback, 'callback server span');
  t.match(callback, { parentSpanId: provider.spanId, links: [{ traceId: submit.traceId, spanId: submit.spanId }] });
  t.match(one(t, otlp.spans, (s) => s.name === 'record_results', 'statement'), { traceId: provider.traceId, parentSpanId: callback.spanId });
  const step = one(t, otlp.spans, (s) => s.name === 'underwriting.callback', 'step');
  t.match(step, { traceId: submit.traceId, parentSpanId: submit.spanId, links: [{ traceId: provider.traceId, spanId: callback.spanId }] });
  t.match(step.attributes, { 'gateway.customer_uuid': cust });
});

t.test("an unmatched callback's server span is a root with the very ids its event stored: the event's delivery attempt hangs from it", async (t) => {
  const otlp = await startOtlpReceiver(t);
  const hooks = await startReceiver(t);
  const gw = await buildTestApp(t, {
    database,
    env: { ...traceEnv(otlp, 'http/json', 'gateway'), EVENT_WEBHOOK_URLS: hooks.url, EVENT_WEBHOOK_SECRET: webhookSecret(), EVENT_WEBHOOK_TIMEOUT_MS: '10000' },
  });
  const cust = customer('unmatched-traced');
  const res = await gw.app.inject({
    method: 'POST',
    url: '/v1/callbacks/underwriting',
    headers: { 'content-type': 'application/json' },
    payload: resultBody(cust, { started: new Date().toISOString() }),
  });
  t.equal(res.statusCode, 200);
  const [pushed] = await hooks.waitFor((r) => r.json.type === 'callback.unmatched' && r.json.data.customerUuid === cust);
  const isCallback = (s: ReceivedSpan) => s.kind === SERVER && s.name === 'POST /v1/callbacks/underwriting' && s.attributes['http.response.status_code'] === 200;
  const isAttempt = (s: ReceivedSpan) => s.kind === CLIENT && s.attributes['gateway.event.id'] === pushed!.json.id;
  await exported(otlp, [gw], [isCallback, isAttempt]);
  const callback = one(t, otlp.spans, isCallback, 'callback server span');
  t.equal(callback.parentSpanId, '', 'a root: it completed no submit');
  const attempt = one(t, otlp.spans, isAttempt, 'delivery attempt');
  t.match(attempt, { traceId: callback.traceId, parentSpanId: callback.spanId }, "the attempt's parent is the callback's span, as its event stored it");
  t.equal(pushed!.headers.traceparent, `00-${callback.traceId}-${attempt.spanId}-01`);
});

t.test("a result the database refuses (year 0000): the failed statement's span hangs from the callback's span, which answered 400", async (t) => {
  const otlp = await startOtlpReceiver(t);
  const gw = await buildTestApp(t, { database, env: traceEnv(otlp, 'http/json', 'gateway') });
  const cust = customer('refused-traced');
  await insertRequest(database.db, { customerUuid: cust, status: 'submitted' });
  const res = await gw.app.inject({
    method: 'POST',
    url: '/v1/callbacks/underwriting',
    headers: { 'content-type': 'application/json' },
    payload: { ...resultBody(cust), started: '0000-01-01T00:00:00Z' },
  });
  t.equal(res.statusCode, 400);
  const isCallback = (s: ReceivedSpan) => s.kind === SERVER && s.attributes['http.response.status_code'] === 400;
  const isFailed = (s: ReceivedSpan) => s.name === 'record_results' && s.statusCode === 2;
  await exported(otlp, [gw], [isCallback, isFailed]);
  const callback = one(t, otlp.spans, isCallback, 'callback server span');
  const failed = one(t, otlp.spans, isFailed, 'failed statement');
  t.match(failed, { traceId: callback.traceId, parentSpanId: callback.spanId, attributes: { 'error.type': /^22/ } });
  t.ok(failed.startTimeUnixNano >= callback.startTimeUnixNano && failed.endTimeUnixNano <= callback.endTimeUnixNano, 'within the callback');
});
