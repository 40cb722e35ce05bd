import { generateKeyPairSync } from 'node:crypto';
import { decodeJwt, jwtVerify } from 'jose';
import { Registry } from 'prom-client';
import t, { type Test } from 'tap';
import type { TokenClientConfig } from '../../src/config/config.js';
import { TokenUnavailableError } from '../../src/provider/errors.js';
import { MAX_TIMER_MS, RENEWAL_LEAD_MS, TokenClient, type TokenClientOptions } from '../../src/provider/token-client.js';
import { MISSING_TOKEN_HINT, MISSING_TOKEN_MESSAGE, TokenEndpointError } from '../../src/provider/token-exchange.js';
import { tokenState } from '../../src/provider/token-source.js';
import { captureLogs } from '../helpers/logs.js';
import { FakeTime, startTokenServer, type TokenServer } from './token-server.js';

const SECRET = 'client-secret-that-must-never-be-logged';

interface Harness {
  server: TokenServer;
  time: FakeTime;
  client: TokenClient;
  registry: Registry;
  logs: ReturnType<typeof captureLogs>;
}

async function harness(
  t: Test,
  options: { config?: Partial<TokenClientConfig>; client?: Partial<TokenClientOptions>; proactive?: boolean; lifetimeS?: number } = {},
): Promise<Harness> {
  const time = new FakeTime();
  const server = await startTokenServer(t, time.now);
  if (options.lifetimeS !== undefined) server.lifetimeS = options.lifetimeS;
  const registry = new Registry();
  const logs = captureLogs();
  const client = new TokenClient({
    config: { authUrl: server.authUrl, clientId: 'gateway-client', clientSecret: SECRET, scope: 'sdk-kyc', assertionKey: undefined, ...options.config },
    registry,
    log: logs.logger,
    now: time.now,
    sleep: time.sleep,
    timers: options.proactive === false ? time.inertTimers : time.timers,
    random: () => 0.5,
    timeoutMs: 2000,
    ...options.client,
  });
  t.teardown(() => client.close());
  return { server, time, client, registry, logs };
}

const expOf = (token: string) => decodeJwt(token).exp! * 1000;

async function rejection(t: Test, promise: Promise<unknown>): Promise<TokenEndpointError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  t.type(err, TokenUnavailableError, 'rejects with TokenUnavailableError');
  t.type(err, TokenEndpointError);
  return err as TokenEndpointError;
}

t.test('renewal happens exactly at exp - 600 s, even when expires_in claims a longer life', async (t) => {
  const { server, time, client } = await harness(t);
  server.expiresIn = 7200;
  const first = await client.getToken();
  const renewAt = expOf(first) - RENEWAL_LEAD_MS;
  t.equal(client.status()!.renewAt.getTime(), renewAt, 'renewal moment from the token, not from expires_in');
  t.same(time.pendingDue, [renewAt], 'the proactive refresh is scheduled at exp - 600 s');

  await time.advance(renewAt - 1 - time.now(), () => client.idle());
  t.equal(await client.getToken(), first);
  t.equal(server.requests.length, 1, 'no request one millisecond before the renewal moment');

  await time.advance(1, () => client.idle());
  t.equal(server.requests.length, 2, 'renewed at the renewal moment');
  const second = await client.getToken();
  t.not(second, first);
  t.equal(second, server.issued[1]);
  t.equal(server.requests.length, 2);
});

t.test('a token whose expires_in says 3600 but whose exp says 900 is renewed 300 s after issue', async (t) => {
  const { server, time, client, logs } = await harness(t, { proactive: false });
  server.lifetimeS = 900;
  server.expiresIn = 3600;
  const issuedAt = time.now();
  const first = await client.getToken();
  t.equal(client.status()!.renewAt.getTime(), issuedAt + 300_000);

  time.jump(300_000 - 1);
  t.equal(await client.getToken(), first);
  await client.idle();
  t.equal(server.requests.length, 1, 'still before exp - 600 s');

  time.jump(1);
  t.equal(await client.getToken(), first, 'the still-valid token is served while renewing');
  await client.idle();
  t.equal(server.requests.length, 2, 'renewed at exp - 600 s, not at expires_in - 600 s');
  t.equal(await client.getToken(), server.issued[1]);
  t.ok(
    logs.entries().some((e) => e.level === 'warn' && String(e.msg).includes('expires_in disagrees')),
    'the disagreement is logged once',
  );
});

t.test('after the renewal moment the valid token is served at once and renewed in the background', async (t) => {
  const { server, time, client } = await harness(t, { proactive: false });
  const first = await client.getToken();
  time.jump(3600_000 - RENEWAL_LEAD_MS + 10_000);
  server.replies.push({ status: 200, body: await server.tokenBody() });
  const served = await Promise.all(Array.from({ length: 10 }, () => client.getToken()));
  t.same(new Set(served), new Set([first]), 'every caller got the cached token without waiting');
  await client.idle();
  t.equal(server.requests.length, 2, 'one background refresh for all of them');
  t.equal(await client.getToken(), server.issued[1]);
});

t.test('when the token is nearly expired, callers wait for the new one', async (t) => {
  const { server, time, client } = await harness(t, { proactive: false });
  const first = await client.getToken();
  time.jump(3600_000 - 10_000);
  const token = await client.getToken();
  t.not(token, first, 'a token with 10 s left is not handed out');
  t.equal(token, server.issued[1]);
  t.equal(server.requests.length, 2);
});

for (const lifetimeS of [120, 300]) {
  for (const proactive of [true, false]) {
    t.test(`tokens living ${lifetimeS} s are renewed at half their life, not per call (${proactive ? 'proactive timer' : 'calls only'})`, async (t) => {
      const { server, time, client, logs } = await harness(t, { lifetimeS, proactive });
      let calls = 0;
      let expired = 0;
      for (let second = 0; second < 3600; second++) {
        const token = await client.getToken();
        calls++;
        if (expOf(token) <= time.now()) expired++;
        await time.advance(1000, () => client.idle());
        await client.idle();
      }
      t.equal(expired, 0, 'never an expired token');
      const expected = Math.ceil(3600 / (lifetimeS / 2)) + 1;
      t.ok(server.requests.length <= expected, `${server.requests.length} requests over ${calls} calls in 1 h (at most ${expected})`);
      t.ok(server.requests.length >= expected - 3, 'and still renewed regularly');
      const warnings = logs.entries().filter((e) => String(e.msg).includes('lives shorter than the renewal lead'));
      t.equal(warnings.length, 1, 'the short lifetime is warned about once');
      t.ok(client.status()!.shortLifetime);
    });
  }
}

t.test('a 600 s token (exactly the lead) does not make a request per call', async (t) => {
  const { server, time, client } = await harness(t, { lifetimeS: 600, proactive: false });
  for (let i = 0; i < 1000; i++) {
    await client.getToken();
    time.jump(1000);
    await client.idle();
  }
  t.ok(server.requests.length <= 5, `${server.requests.length} requests for 1000 calls over 1000 s`);
});

t.test('100 concurrent callers cause one token request', async (t) => {
  const { server, client } = await harness(t);
  const tokens = await Promise.all(Array.from({ length: 100 }, () => client.getToken()));
  t.equal(server.requests.length, 1);
  t.same(new Set(tokens), new Set([server.issued[0]]));
});

t.test('a failure is not cached: the next caller tries again and succeeds', async (t) => {
  const { server, client } = await harness(t);
  server.replies.push({ status: 401, body: { error: 'invalid_client' } });
  const callers = await Promise.allSettled(Array.from({ length: 5 }, () => client.getToken()));
  t.same(callers.map((c) => c.status), Array(5).fill('rejected'), 'concurrent callers share the failure');
  t.equal(server.requests.length, 1);
  const token = await client.getToken();
  t.equal(token, server.issued[0]);
  t.equal(server.requests.length, 2, 'the next caller made a new request');
});

t.test('a response without access_token is a TokenUnavailableError telling the operator what to check', async (t) => {
  const { server, client } = await harness(t);
  server.replies.push({ status: 200, body: { token_type: 'Bearer', expires_in: 3600 } });
  const err = await rejection(t, client.getToken());
  t.equal(err.reason, 'missing_access_token');
  t.equal(err.message, MISSING_TOKEN_MESSAGE);
  t.match(err.message, /signed JWT's content, its signature and the service account's permissions/);
  t.equal(server.requests.length, 1, 'not retried');
});

t.test("a failure's hint goes to the first caller of a failure streak only, and again after a token", async (t) => {
  const { server, time, client } = await harness(t, { proactive: false });
  const noToken = { status: 200, body: { token_type: 'Bearer' } };
  server.replies.push(noToken, noToken);
  const shared = await Promise.allSettled(Array.from({ length: 3 }, () => client.getToken()));
  const later = await rejection(t, client.getToken());
  const hints = [...shared.map((c) => (c as PromiseRejectedResult).reason as TokenEndpointError), later].map((e) => e.hint);
  t.same(hints, [MISSING_TOKEN_HINT, undefined, undefined, undefined]);
  t.equal(server.requests.length, 2);
  await client.getToken();
  time.jump(3600_000);
  server.replies.push(noToken);
  t.ok((await rejection(t, client.getToken())).hint, 'a new streak after a token has its hint again');
});

t.test('tokenState tells configured, expiresAt and renewAt, never the token', async (t) => {
  t.same(tokenState(undefined), { configured: false, expiresAt: null, renewAt: null });
  const { client } = await harness(t);
  t.same(tokenState(client), { configured: true, expiresAt: null, renewAt: null }, 'before the first token');
  const token = await client.getToken();
  const state = tokenState(client);
  t.same(Object.keys(state).sort(), ['configured', 'expiresAt', 'renewAt']);
  t.equal(state.expiresAt!.getTime(), expOf(token));
  t.equal(state.renewAt!.getTime(), expOf(token) - RENEWAL_LEAD_MS);
  t.notMatch(JSON.stringify(state), token.split('.')[2]!);
  state.expiresAt!.setTime(0);
  t.equal(tokenState(client).expiresAt!.getTime(), expOf(token), 'a copy: changing it changes nothing');
});

for (const status of [400, 401, 403]) {
  t.test(`${status} fails fast: one request, no retry`, async (t) => {
    const { server, time, client } = await harness(t);
    server.replies.push({ status, body: { error: 'invalid_client', error_description: `echo ${SECRET}` } });
    const err = await rejection(t, client.getToken());
    t.equal(err.reason, 'rejected');
    t.equal(err.upstreamStatus, status);
    t.match(err.message, `answered ${status} (invalid_client)`);
    t.notMatch(err.message, SECRET, 'the server description is not repeated');
    t.equal(server.requests.length, 1);
    t.same(time.sleeps, []);
  });
}

t.test('503 is retried with jittered exponential backoff, at most 3 attempts', async (t) => {
  const { server, time, client } = await harness(t, { client: { random: () => 0 } });
  server.replies.push({ status: 503 }, { status: 503 }, { status: 503 });
  const err = await rejection(t, client.getToken());
  t.equal(err.reason, 'unavailable');
  t.equal(server.requests.length, 3);
  t.same(time.sleeps, [125, 250], 'base 250 ms doubling, with jitter in [half, full]');
  server.replies.push({ status: 503 }, { status: 502 });
  t.equal(await client.getToken(), server.issued[0], 'third attempt succeeds within one call');
  t.equal(server.requests.length, 6);
});

t.test('Retry-After on 503 and 429 is honoured between attempts', async (t) => {
  const { server, time, client } = await harness(t);
  server.replies.push({ status: 429, headers: { 'retry-after': '3' } });
  server.replies.push({ status: 503, headers: { 'retry-after': new Date(time.now() + 3000 + 7000).toUTCString() } });
  t.equal(await client.getToken(), server.issued[0]);
  t.same(time.sleeps, [3000, 7000], 'waited as long as asked');
});

t.test('a Retry-After longer than a caller can wait fails at once', async (t) => {
  const { server, time, client } = await harness(t);
  server.replies.push({ status: 503, headers: { 'retry-after': '120' } });
  const err = await rejection(t, client.getToken());
  t.equal(err.retryAfterMs, 120_000);
  t.equal(server.requests.length, 1);
  t.same(time.sleeps, []);
});

t.test('network errors and timeouts are retried, then reported as unavailable', async (t) => {
  // The harness's 2 s per attempt: the silent reply waits it out once, and the third attempt (a round
  // trip and the token's signing) must fit in it too, which 200 ms did not on a slow, loaded host.
  const { server, client } = await harness(t);
  server.replies.push({ status: 0, hangUp: true }, { status: 0, silent: true });
  t.equal(await client.getToken(), server.issued[0], 'a hang-up and a timeout, then success');
  t.equal(server.requests.length, 3);
  const unreachable = new TokenClient({
    config: { authUrl: 'http://127.0.0.1:1', clientId: 'c', clientSecret: SECRET, scope: 'sdk-kyc', assertionKey: undefined },
    sleep: async () => {},
  });
  const err = await rejection(t, unreachable.getToken());
  t.equal(err.reason, 'unavailable');
  t.match(err.message, /unreachable/);
});

t.test('a failed background renewal keeps serving the valid token and backs off', async (t) => {
  const { server, time, client, logs } = await harness(t, { proactive: false });
  const first = await client.getToken();
  time.jump(3600_000 - RENEWAL_LEAD_MS);
  server.replies.push({ status: 503 }, { status: 503 }, { status: 503 });
  t.equal(await client.getToken(), first);
  await client.idle();
  t.equal(server.requests.length, 4, 'one renewal of three attempts');
  for (let i = 0; i < 20; i++) t.equal(await client.getToken(), first);
  await client.idle();
  t.equal(server.requests.length, 4, 'no request per call while backing off');
  t.ok(logs.entries().some((e) => e.msg === 'token renewal failed; the current token is still served'));
  time.jump(10_000);
  t.equal(await client.getToken(), first);
  await client.idle();
  t.equal(server.requests.length, 5, 'tried again after the backoff');
  t.equal(await client.getToken(), server.issued[1]);
});

t.test('a renewal failing past the token’s exp goes on in the background, and a token comes back without a call', async (t) => {
  const { server, time, client } = await harness(t);
  const first = await client.getToken();
  const exp = expOf(first);
  // The endpoint fails from the renewal moment on: every renewal and each of its attempts a 503.
  server.replies.push(...Array.from({ length: 500 }, () => ({ status: 503 })));
  await time.advance(exp - time.now(), () => client.idle());
  const byExp = server.requests.length;
  t.ok(byExp > 10, `${byExp - 1} failed requests between the renewal moment and exp`);

  // Past exp, nobody calls: the renewal still goes on (the failures go on being counted, so the
  // alert on them does not end while the gateway holds no token).
  await time.advance(20 * 60_000, () => client.idle());
  const afterExp = server.requests.length - byExp;
  t.ok(afterExp >= 20 * 3, `${afterExp} more failed requests in the 20 minutes after exp (a renewal of 3 attempts at least every minute)`);
  t.ok(afterExp <= 41 * 3, 'backed off (30 to 60 s between renewals), not one after another');
  t.equal(client.status()!.secondsLeft < 0, true, 'the token held is expired');

  // The endpoint answers again: a token is obtained within a minute, before any call asks for it.
  server.replies.length = 0;
  await time.advance(60_000, () => client.idle());
  t.ok(client.status()!.secondsLeft > 3500, 'a fresh token, with no call');
  t.not(await client.getToken(), first);
});

t.test('timers are clamped to 2^31-1 ms and an early firing does not renew', async (t) => {
  const { server, time, client } = await harness(t, { lifetimeS: 100 * 24 * 3600 });
  await client.getToken();
  t.same(time.timerDelays, [MAX_TIMER_MS]);
  await time.advance(MAX_TIMER_MS, () => client.idle());
  t.equal(server.requests.length, 1, 'the clamped timer fired early and only re-armed');
  t.equal(time.timerDelays.length, 2);
});

t.test('close stops the timer and refuses further calls', async (t) => {
  const { time, client } = await harness(t);
  await client.getToken();
  t.equal(time.pendingDue.length, 1);
  client.close();
  t.equal(time.pendingDue.length, 0);
  await t.rejects(client.getToken(), TokenUnavailableError);
});

t.test('the default timer is unref()d', async (t) => {
  const server = await startTokenServer(t);
  const client = new TokenClient({
    config: { authUrl: server.authUrl, clientId: 'c', clientSecret: SECRET, scope: 'sdk-kyc', assertionKey: undefined },
  });
  t.teardown(() => client.close());
  const before = process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
  await client.getToken();
  const after = process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
  t.equal(after, before, 'the renewal timer keeps no process alive');
  t.ok(Math.abs(client.status()!.secondsLeft - 3600) <= 2, 'about an hour left');
});

for (const [kind, alg] of [
  ['rsa', 'RS256'],
  ['ec', 'ES256'],
] as const) {
  t.test(`with an assertion key (${kind}) the request carries a fresh RFC 7523 client assertion instead of Basic`, async (t) => {
    const { publicKey, privateKey } =
      kind === 'rsa'
        ? generateKeyPairSync('rsa', { modulusLength: 2048 })
        : generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
    const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    const { server, time, client, logs } = await harness(t, {
      config: { clientSecret: undefined, assertionKey: pem, clientId: 'assertion-client' },
    });
    server.replies.push({ status: 503 });
    await client.getToken();
    t.equal(server.requests.length, 2);
    const jtis: string[] = [];
    for (const req of server.requests) {
      t.equal(req.headers.authorization, undefined, 'no Basic header');
      t.equal(req.form.get('grant_type'), 'client_credentials');
      t.equal(req.form.get('scope'), 'sdk-kyc');
      t.equal(req.form.get('client_id'), 'assertion-client');
      t.equal(req.form.get('client_assertion_type'), 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer');
      const { payload, protectedHeader } = await jwtVerify(req.form.get('client_assertion')!, publicKey, {
        issuer: 'assertion-client',
        subject: 'assertion-client',
        audience: `${server.authUrl}/oauth2/token`,
        currentDate: new Date(time.now()),
      });
      t.equal(protectedHeader.alg, alg);
      t.type(payload.jti, 'string');
      t.equal(payload.exp! - payload.iat!, 60);
      jtis.push(payload.jti!);
      t.notMatch(logs.text(), req.form.get('client_assertion')!, 'the assertion is never logged');
    }
    t.not(jtis[0], jtis[1], 'a fresh assertion per attempt');
    t.notMatch(logs.text(), 'PRIVATE KEY');
  });
}

t.test('an assertion key of another type is refused at construction', async (t) => {
  const { privateKey } = generateKeyPairSync('ed25519');
  t.throws(
    () =>
      new TokenClient({
        config: {
          authUrl: 'http://127.0.0.1:9',
          clientId: 'c',
          clientSecret: undefined,
          scope: 's',
          assertionKey: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
        },
      }),
    /RSA or a P-256 EC/,
  );
});

t.test('secrets and tokens never reach the logs', async (t) => {
  const { server, time, client, logs } = await harness(t, { lifetimeS: 120 });
  server.expiresIn = 3600;
  server.replies.push({ status: 503, body: { error: 'temporarily_unavailable', echoed: SECRET } });
  await client.getToken();
  server.replies.push({ status: 401, body: { error: 'invalid_client', error_description: SECRET } });
  await client.getToken().catch(() => undefined);
  await time.advance(200_000, () => client.idle());
  await client.getToken().catch(() => undefined);
  t.ok(logs.lines.length >= 3, 'something was logged');
  const text = logs.text();
  t.notMatch(text, SECRET);
  t.notMatch(text, Buffer.from(`gateway-client:${SECRET}`).toString('base64'));
  for (const token of server.issued) {
    t.notMatch(text, token.split('.')[2]!, 'no token signature');
    t.notMatch(text, token.split('.')[1]!, 'no token payload');
  }
});

t.test('every token request outcome is exported at 0 before the first request, so a first failure is an increase', async (t) => {
  const { server, client, registry } = await harness(t);
  const before = await registry.metrics();
  for (const outcome of ['success', 'rejected', 'unavailable', 'invalid_response', 'missing_access_token']) {
    t.match(before, new RegExp(`^provider_token_requests_total\\{outcome="${outcome}"\\} 0$`, 'm'), outcome);
  }
  server.replies.push({ status: 401 });
  await client.getToken().catch(() => undefined);
  t.match(await registry.metrics(), /^provider_token_requests_total\{outcome="rejected"\} 1$/m, 'the first failure counts from 0');
});

t.test('a gauge counts the token requests failed since the last success, and stands between requests', async (t) => {
  const { server, time, client, registry } = await harness(t, { proactive: false });
  const failing = async () => Number(/^provider_token_failures_since_success (\S+)$/m.exec(await registry.metrics())![1]);
  t.equal(await failing(), 0, 'before the first request');
  server.replies.push({ status: 401 });
  await client.getToken().catch(() => undefined);
  time.jump(3600_000);
  t.equal(await failing(), 1, 'one refused request, and nothing since: still failing an hour later');
  server.replies.push({ status: 503 }, { status: 503 });
  await client.getToken();
  t.equal(await failing(), 0, 'a success ends it, though two attempts before it failed');
});

t.test('metrics count token requests by outcome and show the seconds until exp', async (t) => {
  const { server, time, client, registry } = await harness(t);
  t.match(await registry.metrics(), /provider_token_expiry_seconds 0/);
  server.replies.push({ status: 503 }, { status: 401 });
  await client.getToken().catch(() => undefined);
  await client.getToken();
  time.jump(600_000);
  const text = await registry.metrics();
  t.match(text, /provider_token_requests_total\{outcome="unavailable"\} 1/);
  t.match(text, /provider_token_requests_total\{outcome="rejected"\} 1/);
  t.match(text, /provider_token_requests_total\{outcome="success"\} 1/);
  const gauge = Number(/^provider_token_expiry_seconds (\S+)$/m.exec(text)![1]);
  t.equal(gauge, (client.status()!.expiresAt.getTime() - time.now()) / 1000);
  t.ok(gauge > 2990 && gauge <= 3000, 'about 3000 s left after 600 s');
});
