import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { buildTestApp, TEST_PARTNER_TOKEN } from '../helpers/app.js';
import { CPF, PROVIDER_PATH, storedRequests, submitGateway, validRequest } from './fixtures.js';
import { accept, startFakeProvider } from './provider.js';

t.test('a provider 500 answers 502 upstream_rejected and is stored submit_failed with an excerpt', async (t) => {
  const echo = `{"error":"boom","cpf":"${CPF}","formatted":"529.982.247-25","token":"${TEST_PARTNER_TOKEN}","pad":"${'z'.repeat(900)}"}`;
  const { submit, provider, database, logs } = await submitGateway(t, {
    handler: (_received, res) => void res.writeHead(500, { 'content-type': 'application/json' }).end(echo),
  });
  const res = await submit(validRequest());
  t.equal(res.statusCode, 502);
  t.same(res.json(), { error: 'upstream_rejected', message: 'the provider refused the request (HTTP 500)', upstreamStatus: 500 });
  t.equal(provider.received.length, 1);
  const [row] = await storedRequests(database);
  t.match(row, { status: 'submit_failed', upstream_status: 500 });
  t.ok(row!.upstream_error!.length <= 500, 'a short excerpt');
  t.match(row!.upstream_error, /^\{"error":"boom"/);
  t.notMatch(row!.upstream_error, CPF, 'an echoed CPF is not stored');
  t.notMatch(row!.upstream_error, '529.982.247-25', 'nor in its formatted form');
  t.notMatch(row!.upstream_error, TEST_PARTNER_TOKEN, 'nor an echoed partner token');
  t.notMatch(logs.text(), CPF);
  t.notMatch(logs.text(), TEST_PARTNER_TOKEN);
});

t.test('a provider that does not answer in time gives 504 upstream_unavailable, stored submit_failed', async (t) => {
  const { submit, provider, database } = await submitGateway(t, {
    env: { UPSTREAM_TIMEOUT_MS: '300' },
    handler: () => {}, // never answers; the connection is dropped at teardown
  });
  const res = await submit(validRequest());
  t.equal(res.statusCode, 504);
  t.same(res.json(), { error: 'upstream_unavailable', message: 'the provider could not be reached or did not answer in time' });
  t.equal(provider.received.length, 1);
  const [row] = await storedRequests(database);
  t.match(row, { status: 'submit_failed', upstream_status: null, upstream_error: 'provider did not answer within 300 ms' });
});

t.test('a provider that drops the connection gives 504 upstream_unavailable, stored submit_failed', async (t) => {
  const { submit, provider, database } = await submitGateway(t, {
    handler: (_received, res) => void res.socket?.destroy(),
  });
  const res = await submit(validRequest());
  t.equal(res.statusCode, 504);
  t.equal(res.json().error, 'upstream_unavailable');
  t.equal(provider.received.length, 1);
  const [row] = await storedRequests(database);
  t.match(row, { status: 'submit_failed', upstream_status: null, upstream_error: /^provider unreachable: / });
});

t.test('an unreachable provider gives 504 upstream_unavailable, stored submit_failed', async (t) => {
  const closed = http.createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const { port } = closed.address() as AddressInfo;
  await new Promise<void>((resolve) => closed.close(() => resolve()));
  const { submit, database } = await submitGateway(t, { env: { PROVIDER_BASE_URL: `http://127.0.0.1:${port}` } });
  const res = await submit(validRequest());
  t.equal(res.statusCode, 504);
  const [row] = await storedRequests(database);
  t.match(row, { status: 'submit_failed', upstream_error: /ECONNREFUSED/ });
});

t.test('a provider redirect is a rejection (502) and its target is never called', async (t) => {
  const { submit, provider, database } = await submitGateway(t, {
    handler: (received, res) => {
      if (received.url === '/elsewhere') return void res.writeHead(202).end();
      res.writeHead(307, { location: '/elsewhere' }).end();
    },
  });
  const res = await submit(validRequest());
  t.equal(res.statusCode, 502);
  t.same(res.json(), { error: 'upstream_rejected', message: 'the provider refused the request (HTTP 307)', upstreamStatus: 307 });
  t.same(provider.received.map((r) => r.url), [PROVIDER_PATH], 'the redirect target is never called');
  const [row] = await storedRequests(database);
  t.match(row, { status: 'submit_failed', upstream_status: 307, upstream_error: 'provider answered 307 with no body' });
});

t.test('a base URL with a path prefix keeps it in front of the provider path', async (t) => {
  const provider = await startFakeProvider(t);
  const { app } = await buildTestApp(t, { env: { PROVIDER_BASE_URL: `${provider.url}/sandbox/` } });
  const res = await app.inject({ method: 'POST', url: '/v1/underwritings', payload: validRequest() });
  t.equal(res.statusCode, 202);
  t.same(provider.received.map((r) => r.url), [`/sandbox${PROVIDER_PATH}`]);
});

t.test('consecutive provider calls reuse one keep-alive connection', async (t) => {
  const { submit, provider } = await submitGateway(t);
  for (let i = 0; i < 3; i++) t.equal((await submit(validRequest({ customerUuid: `keepalive-${i}` }))).statusCode, 202);
  t.equal(provider.received.length, 3);
  t.equal(provider.connections(), 1);
});

t.test('with PROVIDER_MAX_IN_FLIGHT above 64, as many calls as it allows are in flight at once, none left unsent to time out', async (t) => {
  const calls = 70;
  // The provider answers only once every call has arrived: a call left waiting for a connection never arrives.
  const { submit, provider, database } = await submitGateway(t, {
    // The timeout is only how a call left unsent ends (504): 3 s was too short for 70 submits on PGlite
    // to all reach the provider on a loaded host (every one 504 at load average 9, none sent late).
    env: { PROVIDER_MAX_IN_FLIGHT: '100', PROVIDER_MAX_RPS: '1000', UPSTREAM_TIMEOUT_MS: '20000' },
    handler: async (received, res) => {
      await provider.waitForRequests(calls);
      accept(received, res);
    },
  });
  const answers = await Promise.all(Array.from({ length: calls }, (_, i) => submit(validRequest({ customerUuid: `wide-${i}` }))));
  t.same(
    answers.map((a) => a.statusCode),
    answers.map(() => 202),
  );
  t.equal(provider.received.length, calls);
  t.same(new Set((await storedRequests(database)).map((r) => r.status)), new Set(['submitted']));
});

t.test('an echoed CPF survives in no separator form or escape into the stored excerpt or the logs', async (t) => {
  const escaped = String.raw`\u0037\u0031\u0034\u0032\u0038\u0037\u0039\u0033\u0038\u0036\u0030`;
  const head = `{"spaced":"714 287 938 60","slashed":"714/287/938/60","escaped":"${escaped}","pad":"`;
  // The partner token straddles the 500th character, where the excerpt is cut.
  const echo = `${head}${'z'.repeat(470 - head.length)}${TEST_PARTNER_TOKEN}"}`;
  const { submit, database, logs } = await submitGateway(t, {
    handler: (_received, res) => void res.writeHead(422, { 'content-type': 'application/json' }).end(echo),
  });
  t.equal((await submit(validRequest())).statusCode, 502);
  const [row] = await storedRequests(database);
  const digits = (text: string) => text.replace(/\\u00?3([0-9])/g, '$1').replace(/\D/g, '');
  t.match(row!.upstream_error, /^\{"spaced":"\[redacted\]","slashed":"\[redacted\]","escaped":"\[redacted\]"/);
  t.notMatch(digits(row!.upstream_error!), '71428793860');
  t.notMatch(row!.upstream_error, TEST_PARTNER_TOKEN.slice(0, 16), 'a token at the excerpt cut is not kept in part');
  t.notMatch(digits(logs.text()), '71428793860');
});
