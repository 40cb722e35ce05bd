import { generateKeyPairSync } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t, { type Test } from 'tap';
import { TokenClient } from '../../src/provider/token-client.js';
import { MISSING_TOKEN_HINT } from '../../src/provider/token-exchange.js';
import { buildTestApp, TEST_PARTNER_TOKEN } from '../helpers/app.js';
import { captureLogs } from '../helpers/logs.js';
import { FakeTime, startTokenServer } from './token-server.js';

const CLIENT_SECRET = 'gateway-client-secret-for-e2e';

/** A provider that records what reached it and accepts everything. */
async function startRecordingProvider(t: Test) {
  const received: Array<{ url: string; headers: http.IncomingHttpHeaders; body: unknown }> = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ url: req.url ?? '', headers: req.headers, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) });
      res.writeHead(202, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, received };
}

async function gateway(t: Test) {
  const tokens = await startTokenServer(t);
  const provider = await startRecordingProvider(t);
  const gw = await buildTestApp(t, {
    env: {
      AUTH_URL: tokens.authUrl,
      CLIENT_ID: 'gateway-client',
      CLIENT_SECRET,
      PROVIDER_BASE_URL: provider.baseUrl,
    },
  });
  return { ...gw, tokens, provider };
}

const submission = (customerUuid: string) => ({ customerUuid, cpf: '12345678909', costSavingEnabled: false });

t.test('with a token client configured, the provider receives X-Partner-Auth and Authorization: Bearer <jwt>', async (t) => {
  const { app, tokens, provider, logs } = await gateway(t);
  for (const customer of ['customer-1', 'customer-2']) {
    const res = await app.inject({ method: 'POST', url: '/v1/underwritings', payload: submission(customer) });
    t.equal(res.statusCode, 202);
    t.match(res.json(), { customerUuid: customer, status: 'submitted', upstreamStatus: 202 });
  }
  t.equal(tokens.requests.length, 1, 'one token for both submits');
  t.equal(provider.received.length, 2);
  for (const call of provider.received) {
    t.equal(call.url, '/api/partner/credit/cards/underwritings');
    t.equal(call.headers['x-partner-auth'], TEST_PARTNER_TOKEN);
    t.equal(call.headers.authorization, `Bearer ${tokens.issued[0]}`);
  }
  const metrics = await app.inject({ method: 'GET', url: '/metrics' });
  t.match(metrics.body, /provider_token_requests_total\{outcome="success"\} 1/);
  t.match(metrics.body, /^provider_token_expiry_seconds 3\d{3}/m);
  t.notMatch(logs.text(), tokens.issued[0]!.split('.')[2]!, 'the bearer token is not logged');
  t.notMatch(logs.text(), CLIENT_SECRET);
});

t.test('when the token endpoint fails, submit answers 502 upstream_auth_failed and the provider receives nothing', async (t) => {
  const { app, database, tokens, provider, logs } = await gateway(t);
  tokens.replies.push({ status: 401, body: { error: 'invalid_client' } });
  const res = await app.inject({ method: 'POST', url: '/v1/underwritings', payload: submission('customer-3') });
  t.equal(res.statusCode, 502);
  t.equal(res.json().error, 'upstream_auth_failed');
  t.equal(provider.received.length, 0, 'nothing was sent upstream');
  t.equal(tokens.requests.length, 1, 'a 401 is not retried');
  const rows = await database.db
    .selectFrom('underwriting_requests')
    .select(['customer_uuid', 'status', 'upstream_status', 'upstream_error'])
    .execute();
  t.equal(rows.length, 1);
  t.match(rows[0], { customer_uuid: 'customer-3', status: 'submit_failed', upstream_status: null });
  t.match(rows[0]!.upstream_error, /answered 401 \(invalid_client\)/);
  t.notMatch(logs.text(), CLIENT_SECRET);

  const retry = await app.inject({ method: 'POST', url: '/v1/underwritings', payload: submission('customer-3') });
  t.equal(retry.statusCode, 202, 'the failure was not cached: the next submit gets a token');
  t.equal(provider.received[0]!.headers.authorization, `Bearer ${tokens.issued[0]}`);
});

for (const method of ['client_secret_basic', 'private_key_jwt'] as const) {
  t.test(`a token answer without access_token puts the provider's hint in the submit log, once per failure streak (${method})`, async (t) => {
    const time = new FakeTime();
    const tokens = await startTokenServer(t, time.now);
    const provider = await startRecordingProvider(t);
    const logs = captureLogs();
    const pem = generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    const client = new TokenClient({
      config: {
        authUrl: tokens.authUrl,
        clientId: 'gateway-client',
        clientSecret: method === 'client_secret_basic' ? CLIENT_SECRET : undefined,
        scope: 'sdk-kyc',
        assertionKey: method === 'private_key_jwt' ? pem : undefined,
      },
      log: logs.logger,
      now: time.now,
      sleep: time.sleep,
      timers: time.inertTimers,
    });
    t.teardown(() => client.close());
    const { app } = await buildTestApp(t, { env: { PROVIDER_BASE_URL: provider.baseUrl }, tokenSource: client, logs });
    const noToken = { status: 200, body: { token_type: 'Bearer', expires_in: 3600 } };
    const submit = (customer: string) => app.inject({ method: 'POST', url: '/v1/underwritings', payload: submission(customer) });
    const failures = () => logs.entries().filter((e) => e.msg === 'submit failed upstream');

    tokens.replies.push(noToken, noToken);
    for (const customer of ['streak-1', 'streak-2']) {
      const res = await submit(customer);
      t.equal(res.statusCode, 502);
      t.equal(res.json().error, 'upstream_auth_failed');
    }
    tokens.replies.push(noToken, noToken, noToken);
    const together = await Promise.all(['streak-3', 'streak-4', 'streak-5'].map(submit));
    t.same(together.map((r) => r.statusCode), [502, 502, 502]);
    tokens.replies.length = 0;
    t.same(failures().map((e) => e.code), Array(5).fill('upstream_auth_failed'), 'every failed submit is logged');
    t.same(failures().map((e) => e.hint), [MISSING_TOKEN_HINT, undefined, undefined, undefined, undefined], 'the hint once in the streak');

    t.equal((await submit('recovered')).statusCode, 202, 'a token again: the streak ends');
    time.jump(3600_000);
    tokens.replies.push(noToken, noToken);
    for (const customer of ['streak-6', 'streak-7']) t.equal((await submit(customer)).statusCode, 502);
    t.same(failures().slice(5).map((e) => e.hint), [MISSING_TOKEN_HINT, undefined], 'a new streak says it again, once');

    const text = logs.text();
    t.notMatch(text, CLIENT_SECRET, 'no client secret');
    t.notMatch(text, Buffer.from(`gateway-client:${CLIENT_SECRET}`).toString('base64'));
    t.notMatch(text, 'PRIVATE KEY');
    for (const req of tokens.requests) {
      const assertion = req.form.get('client_assertion');
      if (assertion) t.notMatch(text, assertion.split('.')[2]!, 'no client assertion');
    }
    t.equal(tokens.issued.length, 1);
    t.notMatch(text, tokens.issued[0]!.split('.')[2]!, 'no token');
  });
}
