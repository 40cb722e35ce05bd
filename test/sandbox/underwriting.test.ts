import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { decide, underwritingResultSchema } from '../../src/provider/schemas.js';
import { SANDBOX_DEFAULT_CPFS } from '../../src/sandbox/config.js';
import { httpRequest } from '../helpers/http.js';
import { callbackReceiver, PARTNER_TOKEN, requestBody, startSandbox, UNDERWRITINGS } from './helpers.js';

const AUTH = { 'x-partner-auth': PARTNER_TOKEN };
const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

t.test('a valid request from an allowed peer with the partner token is accepted with 202', async (t) => {
  const receiver = await callbackReceiver(t);
  const { base } = await startSandbox(t, { SANDBOX_CALLBACK_URL: receiver.url });
  const res = await httpRequest(`${base}${UNDERWRITINGS}`, { headers: AUTH, body: requestBody() });
  t.equal(res.status, 202);
  t.same(res.json, { customerUuid: 'customer-1', status: 'accepted' });
  await receiver.received(1);
});

t.test('a missing or wrong X-Partner-Auth is refused 401 and nothing is called back', async (t) => {
  const receiver = await callbackReceiver(t);
  const { base, logs } = await startSandbox(t, { SANDBOX_CALLBACK_URL: receiver.url });
  const other = 'x'.repeat(64);
  for (const headers of [{} as Record<string, string>, { 'x-partner-auth': other }, { 'x-partner-auth': PARTNER_TOKEN.slice(1) }]) {
    const res = await httpRequest(`${base}${UNDERWRITINGS}`, { headers, body: requestBody() });
    t.equal(res.status, 401);
    t.same(res.json, { error: 'unauthorized', message: 'missing or wrong X-Partner-Auth' });
  }
  t.notOk(logs.text().includes(other), 'the presented token is not logged');
  t.notOk(logs.text().includes(PARTNER_TOKEN), 'the real token is not logged');
  // A request that is accepted afterwards is the first (and only) delivery.
  await httpRequest(`${base}${UNDERWRITINGS}`, { headers: AUTH, body: requestBody({ customerUuid: 'after' }) });
  const [only] = await receiver.received(1);
  t.equal(only!.body.customerUuid, 'after');
});

t.test('a peer outside the sandbox allowlist is refused 403, even with the right token', async (t) => {
  const { base, logs } = await startSandbox(t);
  const res = await httpRequest(`${base}${UNDERWRITINGS}`, { headers: AUTH, body: requestBody(), localAddress: '127.0.0.2' });
  t.equal(res.status, 403);
  t.same(res.json, { error: 'forbidden', message: 'this address may not use this route' });
  t.match(logs.entries().find((e) => e.msg === 'sandbox: refused: address not in the allowlist'), { client: '127.0.0.2' });
});

t.test('SANDBOX_ALLOWED_IPS admits the peers it lists', async (t) => {
  const { base } = await startSandbox(t, { SANDBOX_ALLOWED_IPS: '127.0.0.2/32' });
  const listed = await httpRequest(`${base}${UNDERWRITINGS}`, { headers: AUTH, body: requestBody(), localAddress: '127.0.0.2' });
  t.equal(listed.status, 202);
  const unlisted = await httpRequest(`${base}${UNDERWRITINGS}`, { headers: AUTH, body: requestBody() });
  t.equal(unlisted.status, 403);
});

t.test('a body the gateway would refuse is refused 400 with its issues', async (t) => {
  const { base } = await startSandbox(t);
  const res = await httpRequest(`${base}${UNDERWRITINGS}`, {
    headers: AUTH,
    body: { customerUuid: 'has space', cpf: 12345678901, costSavingEnabled: false, srd: { housingSpends: -1 }, extra: 1 },
  });
  t.equal(res.status, 400);
  t.equal(res.json.error, 'validation_failed');
  const paths = (res.json.issues as Array<{ path: string }>).map((i) => i.path).sort();
  t.same(paths, ['cpf', 'customerUuid', 'extra', 'srd.grossIncome', 'srd.housingSpends']);
});

t.test('the cost-saving reject CPF with cost saving on is called back with score, band and limit -1', async (t) => {
  const receiver = await callbackReceiver(t);
  const { base } = await startSandbox(t, { SANDBOX_CALLBACK_URL: receiver.url, SANDBOX_DELAY_MS: '20' });
  const res = await httpRequest(`${base}${UNDERWRITINGS}`, {
    headers: AUTH,
    body: requestBody({ customerUuid: 'cs-1', cpf: SANDBOX_DEFAULT_CPFS.costSavingReject, costSavingEnabled: true }),
  });
  t.equal(res.status, 202);
  const [delivery] = await receiver.received(1);
  const body = delivery!.body;
  t.ok(underwritingResultSchema.safeParse(body).success, 'the gateway accepts its shape');
  t.same(Object.keys(body).sort(), ['customerUuid', 'finished', 'response', 'serviceType', 'started']);
  t.equal(body.customerUuid, 'cs-1');
  t.equal(body.serviceType, 'CREDIT_SCORE');
  t.match(body.started, ISO_UTC);
  t.match(body.finished, ISO_UTC);
  t.ok(Date.parse(body.finished) >= Date.parse(body.started), 'finished is not before started');
  t.same(body.response, { costSavingEnabled: true, score: -1, riskBand: -1, limit: -1 });
  t.equal(decide(body.response), 'filtered');
  t.equal(delivery!.headers['content-type'], 'application/json');
  t.equal(delivery!.url, '/v1/callbacks/underwriting');
});

t.test('the cost-saving reject CPF with cost saving off gets an ordinary scored outcome', async (t) => {
  const receiver = await callbackReceiver(t);
  const { base } = await startSandbox(t, { SANDBOX_CALLBACK_URL: receiver.url });
  await httpRequest(`${base}${UNDERWRITINGS}`, {
    headers: AUTH,
    body: requestBody({ cpf: SANDBOX_DEFAULT_CPFS.costSavingReject, costSavingEnabled: false }),
  });
  const [delivery] = await receiver.received(1);
  t.equal(delivery!.body.response.costSavingEnabled, false);
  t.not(delivery!.body.response.score, -1);
  t.ok(delivery!.body.response.limit >= 0);
});

t.test('the standard reject CPF is called back with limit 0, a low score and the worst band', async (t) => {
  const receiver = await callbackReceiver(t);
  const { base } = await startSandbox(t, { SANDBOX_CALLBACK_URL: receiver.url });
  await httpRequest(`${base}${UNDERWRITINGS}`, {
    headers: AUTH,
    body: requestBody({ customerUuid: 'sr-1', cpf: SANDBOX_DEFAULT_CPFS.standardReject, srd: { grossIncome: 50000 } }),
  });
  const [delivery] = await receiver.received(1);
  const { response } = delivery!.body;
  t.equal(delivery!.body.customerUuid, 'sr-1');
  t.equal(response.limit, 0);
  t.equal(response.costSavingEnabled, false);
  t.ok(response.score >= 100 && response.score < 300, `score ${response.score} in 100-299`);
  t.equal(response.riskBand, 5);
  t.equal(decide(response), 'declined');
});

t.test('the approve CPF is called back with a score in 600-1000 and a whole limit above zero', async (t) => {
  const receiver = await callbackReceiver(t);
  const { base } = await startSandbox(t, { SANDBOX_CALLBACK_URL: receiver.url });
  await httpRequest(`${base}${UNDERWRITINGS}`, {
    headers: AUTH,
    body: requestBody({ customerUuid: 'ap-1', cpf: SANDBOX_DEFAULT_CPFS.approve, costSavingEnabled: true }),
  });
  const [delivery] = await receiver.received(1);
  const { response } = delivery!.body;
  t.ok(response.score >= 600 && response.score <= 1000, `score ${response.score} in 600-1000`);
  t.ok(Number.isInteger(response.limit) && response.limit > 0, `limit ${response.limit} is a whole number above 0`);
  t.ok([1, 2, 3].includes(response.riskBand));
  t.equal(decide(response), 'approved');
});

t.test('custom scenario CPFs replace the defaults', async (t) => {
  const receiver = await callbackReceiver(t);
  const { base } = await startSandbox(t, { SANDBOX_CALLBACK_URL: receiver.url, SANDBOX_CPF_STANDARD_REJECT: '11144477735' });
  await httpRequest(`${base}${UNDERWRITINGS}`, { headers: AUTH, body: requestBody({ cpf: '11144477735' }) });
  const [delivery] = await receiver.received(1);
  t.equal(delivery!.body.response.limit, 0);
  t.equal(delivery!.body.response.riskBand, 5);
});

t.test('any other CPF gets the same outcome every time', async (t) => {
  const receiver = await callbackReceiver(t);
  const { base } = await startSandbox(t, { SANDBOX_CALLBACK_URL: receiver.url });
  const body = requestBody({ cpf: '52998224725', srd: { grossIncome: 8000, housingSpends: 1500 } });
  await httpRequest(`${base}${UNDERWRITINGS}`, { headers: AUTH, body: { ...body, customerUuid: 'first' } });
  await httpRequest(`${base}${UNDERWRITINGS}`, { headers: AUTH, body: { ...body, customerUuid: 'second' } });
  const [a, b] = await receiver.received(2);
  t.same(a!.body.response, b!.body.response);
  t.not(a!.body.customerUuid, b!.body.customerUuid);
  t.ok(underwritingResultSchema.safeParse(a!.body).success);
});

t.test('a callback answered 500 twice is retried until the receiver answers 2xx', async (t) => {
  const receiver = await callbackReceiver(t, [500, 500, 200]);
  const { base, logs } = await startSandbox(
    t,
    { SANDBOX_CALLBACK_URL: receiver.url },
    { retry: { firstRetryMs: 5, maxRetryMs: 20, giveUpAfterMs: 10_000 } },
  );
  await httpRequest(`${base}${UNDERWRITINGS}`, { headers: AUTH, body: requestBody({ customerUuid: 'retry-me' }) });
  const delivered = await logs.waitFor((e) => e.msg === 'sandbox: callback delivered');
  t.equal(delivered.attempt, 3);
  t.equal(receiver.deliveries.length, 3, 'three deliveries, the last one accepted');
  t.same(receiver.deliveries[0]!.body, receiver.deliveries[2]!.body, 'every attempt carries the same result');
  t.equal(logs.entries().filter((e) => e.msg === 'sandbox: callback delivery failed; will retry').length, 2);
});

t.test('an unreachable callback URL is retried, then abandoned after the retry window', async (t) => {
  const { base, logs } = await startSandbox(
    t,
    { SANDBOX_CALLBACK_URL: 'http://127.0.0.1:1/v1/callbacks/underwriting' },
    // A window many retries wide (5-10 ms apart) but short: at 60 ms, one attempt slowed by a loaded
    // machine used up the whole window and the callback was abandoned after a single try.
    { retry: { firstRetryMs: 5, maxRetryMs: 10, giveUpAfterMs: 1000 } },
  );
  await httpRequest(`${base}${UNDERWRITINGS}`, { headers: AUTH, body: requestBody({ customerUuid: 'nobody-home' }) });
  const abandoned = await logs.waitFor((e) => e.msg === 'sandbox: callback abandoned after retries');
  t.equal(abandoned.level, 'error');
  t.ok(abandoned.attempts >= 2, `tried ${abandoned.attempts} times`);
  t.equal(abandoned.customerUuid, 'nobody-home');
});

t.test('a receiver that never answers: the attempt gives up at its timeout and is retried; answered callbacks share one connection', async (t) => {
  // The first attempt is read and never answered; the later ones are answered 200.
  const sockets = new Set<unknown>();
  let requests = 0;
  const server = http.createServer((req, res) => {
    sockets.add(req.socket);
    requests++;
    req.resume();
    if (requests === 1) return;
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())).finally(() => server.closeAllConnections()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/callbacks/underwriting`;
  const { base, logs } = await startSandbox(
    t,
    { SANDBOX_CALLBACK_URL: url },
    { retry: { firstRetryMs: 5, maxRetryMs: 10, giveUpAfterMs: 60_000, attemptTimeoutMs: 300 } },
  );
  await httpRequest(`${base}${UNDERWRITINGS}`, { headers: AUTH, body: requestBody({ customerUuid: 'silent-1' }) });
  const failed = await logs.waitFor((e) => e.msg === 'sandbox: callback delivery failed; will retry');
  t.match(failed.failure, /no answer within 300 ms/);
  await logs.waitFor((e) => e.msg === 'sandbox: callback delivered' && e.customerUuid === 'silent-1');
  for (const customerUuid of ['later-1', 'later-2', 'later-3']) {
    await httpRequest(`${base}${UNDERWRITINGS}`, { headers: AUTH, body: requestBody({ customerUuid }) });
    await logs.waitFor((e) => e.msg === 'sandbox: callback delivered' && e.customerUuid === customerUuid);
  }
  t.equal(requests, 5);
  t.equal(sockets.size, 2, 'the timed-out connection, then one kept alive for the four answered');
});

t.test('a callback secret in the callback URL is sent but never logged', async (t) => {
  const receiver = await callbackReceiver(t);
  const { base, logs } = await startSandbox(t, { SANDBOX_CALLBACK_URL: `${receiver.url}?token=callback-secret-value` });
  await httpRequest(`${base}${UNDERWRITINGS}`, { headers: AUTH, body: requestBody() });
  const [delivery] = await receiver.received(1);
  t.equal(delivery!.url, '/v1/callbacks/underwriting?token=callback-secret-value');
  await logs.waitFor((e) => e.msg === 'sandbox: callback delivered');
  t.notOk(logs.text().includes('callback-secret-value'));
});

t.test('without a callback URL the request is accepted and the undelivered result is logged', async (t) => {
  const { base, logs } = await startSandbox(t);
  const res = await httpRequest(`${base}${UNDERWRITINGS}`, { headers: AUTH, body: requestBody({ customerUuid: 'lost' }) });
  t.equal(res.status, 202);
  const warning = await logs.waitFor((e) => e.msg === 'sandbox: no callback URL configured; result not delivered');
  t.equal(warning.customerUuid, 'lost');
});

t.test('closing the simulator cancels callbacks still waiting for their delay', async (t) => {
  const receiver = await callbackReceiver(t);
  const { app, base } = await startSandbox(t, { SANDBOX_CALLBACK_URL: receiver.url, SANDBOX_DELAY_MS: '150' });
  await httpRequest(`${base}${UNDERWRITINGS}`, { headers: AUTH, body: requestBody() });
  await app.close();
  // A second receiver proves time has passed beyond the delay without sleeping on a guess.
  const later = await startSandbox(t, { SANDBOX_CALLBACK_URL: receiver.url, SANDBOX_DELAY_MS: '300' });
  await httpRequest(`${later.base}${UNDERWRITINGS}`, { headers: AUTH, body: requestBody({ customerUuid: 'control' }) });
  const [first] = await receiver.received(1);
  t.equal(first!.body.customerUuid, 'control', 'the cancelled callback never arrived');
  t.equal(receiver.deliveries.length, 1);
});
