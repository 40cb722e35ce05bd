import { generateKeyPairSync } from 'node:crypto';
import t, { type Test } from 'tap';
import { clientAuthentication, clientSecretBasic } from '../../src/provider/token-auth.js';
import {
  MISSING_TOKEN_HINT,
  MISSING_TOKEN_MESSAGE,
  parseRetryAfter,
  processTokenResponse,
  type TokenEndpointAnswer,
  TokenEndpointError,
  tokenRequest,
} from '../../src/provider/token-exchange.js';
import { startTokenServer } from './token-server.js';

const SECRET = 'client-secret-that-must-never-be-logged';
const NOW = Date.UTC(2026, 0, 1);
const attempt = () => ({ now: Date.now(), signal: AbortSignal.timeout(2000) });
const answer = (status: number, body: unknown, retryAfter?: string): TokenEndpointAnswer => ({
  status,
  retryAfter,
  text: typeof body === 'string' ? body : JSON.stringify(body),
});

function refusal(t: Test, fn: () => unknown): TokenEndpointError {
  try {
    fn();
  } catch (err) {
    t.type(err, TokenEndpointError);
    return err as TokenEndpointError;
  }
  throw new Error('expected a TokenEndpointError');
}

t.test('the request is a form POST to /oauth2/token with HTTP Basic, client_credentials and the scope', async (t) => {
  const server = await startTokenServer(t);
  const tokenUrl = `${server.authUrl}/oauth2/token`;
  const got = await tokenRequest({ tokenUrl, scope: 'sdk-kyc', auth: clientSecretBasic('gateway-client', SECRET) }, attempt());
  t.equal(got.status, 200);
  t.equal(processTokenResponse(got, Date.now()).accessToken, server.issued[0]);
  const [req] = server.requests;
  t.equal(req!.method, 'POST');
  t.equal(req!.url, '/oauth2/token');
  t.equal(req!.headers['content-type'], 'application/x-www-form-urlencoded');
  t.equal(req!.headers.authorization, `Basic ${Buffer.from(`gateway-client:${SECRET}`).toString('base64')}`);
  t.same([...req!.form.entries()], [
    ['grant_type', 'client_credentials'],
    ['scope', 'sdk-kyc'],
  ]);
});

t.test('client id and secret with special characters are form-encoded before base64 (RFC 6749 §2.3.1)', async (t) => {
  const server = await startTokenServer(t);
  const clientId = 'partner:id with space+plus/é';
  const clientSecret = 'sé cret%&=:/?#+~*';
  await tokenRequest({ tokenUrl: `${server.authUrl}/oauth2/token`, scope: 's', auth: clientSecretBasic(clientId, clientSecret) }, attempt());
  const basic = Buffer.from(server.requests[0]!.headers.authorization!.replace(/^Basic /, ''), 'base64').toString('utf8');
  t.equal(basic, 'partner%3Aid+with+space%2Bplus%2F%C3%A9:s%C3%A9+cret%25%26%3D%3A%2F%3F%23%2B%7E*');
  const [user, password] = basic.split(':').map((p) => decodeURIComponent(p.replace(/\+/g, ' ')));
  t.equal(user, clientId);
  t.equal(password, clientSecret);
});

t.test('redirects are not followed: the credentials go nowhere else', async (t) => {
  const server = await startTokenServer(t);
  const elsewhere = await startTokenServer(t);
  server.replies.push({ status: 307, headers: { location: `${elsewhere.authUrl}/oauth2/token` } });
  const got = await tokenRequest({ tokenUrl: `${server.authUrl}/oauth2/token`, scope: 's', auth: clientSecretBasic('c', SECRET) }, attempt());
  t.equal(got.status, 307);
  t.equal(refusal(t, () => processTokenResponse(got, Date.now())).reason, 'rejected');
  t.equal(elsewhere.requests.length, 0);
});

t.test('an unreachable endpoint is a retryable TokenEndpointError', async (t) => {
  const err = await tokenRequest({ tokenUrl: 'http://127.0.0.1:1/oauth2/token', scope: 's', auth: clientSecretBasic('c', SECRET) }, attempt()).then(
    () => undefined,
    (e: unknown) => e as TokenEndpointError,
  );
  t.type(err, TokenEndpointError);
  t.equal(err!.reason, 'unavailable');
  t.ok(err!.retryable);
});

t.test('an answer without access_token says what to check, as a hint for the log too', async (t) => {
  const err = refusal(t, () => processTokenResponse(answer(200, { token_type: 'Bearer', expires_in: 3600 }), NOW));
  t.equal(err.reason, 'missing_access_token');
  t.equal(err.message, MISSING_TOKEN_MESSAGE);
  t.equal(err.hint, MISSING_TOKEN_HINT);
  t.notOk(err.retryable);
  t.equal(err.withoutHint().hint, undefined, 'a copy without the hint for the streak after its first caller');
  t.equal(err.withoutHint().message, MISSING_TOKEN_MESSAGE);
});

t.test('400, 401 and 403 are refusals naming only the OAuth error code, with the credentials hint', async (t) => {
  for (const status of [400, 401, 403]) {
    const err = refusal(t, () => processTokenResponse(answer(status, { error: 'invalid_client', error_description: `echo ${SECRET}` }), NOW));
    t.equal(err.reason, 'rejected');
    t.equal(err.message, `token endpoint answered ${status} (invalid_client): check CLIENT_ID, the client credentials and TOKEN_SCOPE`);
    t.match(err.hint, /CLIENT_ID/);
    t.notMatch(err.message, SECRET);
  }
  t.equal(refusal(t, () => processTokenResponse(answer(404, ''), NOW)).hint, undefined);
});

t.test('429 and 5xx are retryable, with the Retry-After they asked for', async (t) => {
  const busy = refusal(t, () => processTokenResponse(answer(429, '', '3'), NOW));
  t.ok(busy.retryable);
  t.equal(busy.retryAfterMs, 3000);
  t.equal(refusal(t, () => processTokenResponse(answer(503, ''), NOW)).retryAfterMs, undefined);
  t.equal(parseRetryAfter(new Date(NOW + 7000).toUTCString(), NOW), 7000);
  t.equal(parseRetryAfter(new Date(NOW - 7000).toUTCString(), NOW), 0);
  t.equal(parseRetryAfter(['12', '1'], NOW), 12_000);
  t.equal(parseRetryAfter('soon', NOW), undefined);
  t.equal(parseRetryAfter(' ', NOW), undefined);
});

t.test('the access_token must be an unexpired JWT with a numeric exp, of type Bearer', async (t) => {
  const jwt = (payload: object) => `eyJhbGciOiJIUzI1NiJ9.${Buffer.from(JSON.stringify(payload)).toString('base64url')}.c2ln`;
  const exp = NOW / 1000 + 3600;
  t.same(processTokenResponse(answer(200, { access_token: jwt({ exp }), expires_in: 60 }), NOW), {
    accessToken: jwt({ exp }),
    expiresAt: exp * 1000,
    expiresIn: 60,
  });
  t.match(refusal(t, () => processTokenResponse(answer(200, { access_token: 'opaque' }), NOW)).message, /not a JWT/);
  t.match(refusal(t, () => processTokenResponse(answer(200, { access_token: jwt({ sub: 'x' }) }), NOW)).message, /no numeric exp/);
  t.match(refusal(t, () => processTokenResponse(answer(200, { access_token: jwt({ exp: NOW / 1000 }) }), NOW)).message, /expired at/);
  t.match(refusal(t, () => processTokenResponse(answer(200, { access_token: jwt({ exp }), token_type: 'mac' }), NOW)).message, /not Bearer/);
  t.match(refusal(t, () => processTokenResponse(answer(200, 'not json'), NOW)).message, /not JSON/);
});

t.test('the assertion wins over a secret; neither is a configuration error', async (t) => {
  const pem = generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const base = { authUrl: 'http://127.0.0.1:9', clientId: 'c', scope: 's' };
  t.equal(clientAuthentication({ ...base, clientSecret: SECRET, assertionKey: pem }).method, 'private_key_jwt');
  t.equal(clientAuthentication({ ...base, clientSecret: SECRET, assertionKey: undefined }).method, 'client_secret_basic');
  t.throws(() => clientAuthentication({ ...base, clientSecret: undefined, assertionKey: undefined }), /client secret or a client assertion key/);
});
