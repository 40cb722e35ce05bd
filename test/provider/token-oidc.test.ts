import { generateKeyPairSync } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { decodeJwt } from 'jose';
import Provider from 'oidc-provider';
import t, { type Test } from 'tap';
import { TokenUnavailableError } from '../../src/provider/errors.js';
import { TokenClient } from '../../src/provider/token-client.js';
import { captureLogs } from '../helpers/logs.js';
import { FakeTime } from './token-server.js';

// oidc-provider reads Date.now(); sharing the fake clock with it lets the whole exchange run in simulated time.
const time = new FakeTime(Date.now());
const realNow = Date.now;
Date.now = time.now;
t.teardown(() => {
  Date.now = realNow;
});

const CLIENT_SECRET = 'oidc-client-secret-0123456789';
const RESOURCE = 'urn:provider:underwriting';

/** A real OAuth 2.0 server (oidc-provider) on loopback, its token endpoint at /oauth2/token. */
async function startOidcProvider(t: Test): Promise<{ authUrl: string; tokenRequests: () => number }> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const authUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const signingKey = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' });
  const provider = new Provider(authUrl, {
    clients: [
      {
        client_id: 'gateway',
        client_secret: CLIENT_SECRET,
        grant_types: ['client_credentials'],
        response_types: [],
        redirect_uris: [],
        token_endpoint_auth_method: 'client_secret_basic',
        scope: 'sdk-kyc',
      },
    ],
    jwks: { keys: [{ ...signingKey, kid: 'test', use: 'sig', alg: 'RS256' }] },
    routes: { token: '/oauth2/token' },
    scopes: ['sdk-kyc'],
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => RESOURCE,
        useGrantedResource: () => true,
        getResourceServerInfo: () => ({
          scope: 'sdk-kyc',
          audience: RESOURCE,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'RS256' } },
        }),
      },
    },
  });
  let tokenRequests = 0;
  const handle = provider.callback();
  server.on('request', (req, res) => {
    if (req.method === 'POST' && req.url === '/oauth2/token') tokenRequests++;
    handle(req, res);
  });
  t.teardown(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { authUrl, tokenRequests: () => tokenRequests };
}

function client(t: Test, authUrl: string, proactive: boolean, clientSecret = CLIENT_SECRET) {
  const logs = captureLogs();
  const c = new TokenClient({
    config: { authUrl, clientId: 'gateway', clientSecret, scope: 'sdk-kyc', assertionKey: undefined },
    log: logs.logger,
    now: time.now,
    sleep: time.sleep,
    timers: proactive ? time.timers : time.inertTimers,
  });
  t.teardown(() => c.close());
  return { client: c, logs };
}

t.test('oidc-provider issues a 600 s JWT for client_secret_basic, client_credentials and sdk-kyc', async (t) => {
  const op = await startOidcProvider(t);
  const { client: c } = client(t, op.authUrl, false);
  const claims = decodeJwt(await c.getToken());
  t.equal(claims.exp! - claims.iat!, 600, 'exactly the renewal lead');
  t.equal(claims.aud, RESOURCE);
  t.equal(claims.scope, 'sdk-kyc');
  t.equal(claims.client_id, 'gateway');
  t.ok(c.status()!.shortLifetime, 'treated as a short-lived token');
  t.equal(op.tokenRequests(), 1);
});

for (const proactive of [true, false]) {
  t.test(`against oidc-provider the client makes a bounded number of requests over 2 simulated hours (${proactive ? 'proactive timer' : 'calls only'})`, async (t) => {
    const op = await startOidcProvider(t);
    const { client: c, logs } = client(t, op.authUrl, proactive);
    let expired = 0;
    const calls = 7200;
    for (let second = 0; second < calls; second++) {
      const token = await c.getToken();
      if (decodeJwt(token).exp! * 1000 <= time.now()) expired++;
      await time.advance(1000, () => c.idle());
      await c.idle();
    }
    t.equal(expired, 0, 'never an expired token');
    t.ok(op.tokenRequests() <= 25, `${op.tokenRequests()} token requests for ${calls} calls (renewed every ~300 s)`);
    t.ok(op.tokenRequests() >= 20, 'and renewed throughout');
    t.equal(logs.entries().filter((e) => String(e.msg).includes('lives shorter')).length, 1);
  });
}

t.test('a wrong client secret at oidc-provider fails fast with invalid_client', async (t) => {
  const op = await startOidcProvider(t);
  const { client: c, logs } = client(t, op.authUrl, false, 'wrong-secret');
  const err = await c.getToken().catch((e: unknown) => e);
  t.type(err, TokenUnavailableError);
  t.match((err as Error).message, /answered 401 \(invalid_client\)/);
  t.equal(op.tokenRequests(), 1, 'not retried');
  t.notMatch(logs.text(), 'wrong-secret');
});
