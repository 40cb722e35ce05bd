import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t, { type Test } from 'tap';
import { buildTestApp, TEST_PARTNER_TOKEN } from '../helpers/app.js';
import { startTokenServer } from './token-server.js';

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
