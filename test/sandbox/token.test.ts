import { generateKeyPairSync, type KeyObject, randomUUID } from 'node:crypto';
import { createLocalJWKSet, decodeJwt, decodeProtectedHeader, jwtVerify, SignJWT } from 'jose';
import t from 'tap';
import { SANDBOX_DEFAULT_CLIENT_ID, SANDBOX_DEFAULT_CLIENT_SECRET } from '../../src/sandbox/config.js';
import { SANDBOX_ISSUER } from '../../src/sandbox/tokens.js';
import { httpRequest } from '../helpers/http.js';
import { startSandbox } from './helpers.js';

const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;
const GOOD = basic(SANDBOX_DEFAULT_CLIENT_ID, SANDBOX_DEFAULT_CLIENT_SECRET);

t.test('good client credentials get a signed JWT whose exp is the configured TTL away', async (t) => {
  const { base } = await startSandbox(t, { SANDBOX_TOKEN_TTL_S: '900' });
  const before = Math.floor(Date.now() / 1000);
  const res = await httpRequest(`${base}/oauth2/token`, {
    headers: { ...FORM, authorization: GOOD },
    body: 'grant_type=client_credentials&scope=sdk-kyc',
  });
  const after = Math.floor(Date.now() / 1000);
  t.equal(res.status, 200);
  t.equal(res.headers['cache-control'], 'no-store');
  t.same(Object.keys(res.json).sort(), ['access_token', 'expires_in', 'token_type']);
  t.equal(res.json.token_type, 'Bearer');
  t.equal(res.json.expires_in, 900);

  const claims = decodeJwt(res.json.access_token);
  t.ok(claims.exp! >= before + 900 && claims.exp! <= after + 900, 'exp = issue time + SANDBOX_TOKEN_TTL_S');
  t.equal(claims.sub, SANDBOX_DEFAULT_CLIENT_ID);
  t.equal(claims.scope, 'sdk-kyc');
  t.equal(decodeProtectedHeader(res.json.access_token).alg, 'RS256');

  const jwks = await httpRequest(`${base}/.well-known/jwks.json`);
  const verified = await jwtVerify(res.json.access_token, createLocalJWKSet(jwks.json), { issuer: SANDBOX_ISSUER });
  t.equal(verified.payload.exp, claims.exp, 'the signature verifies with the published key');
});

t.test('custom client credentials replace the defaults', async (t) => {
  const { base } = await startSandbox(t, { SANDBOX_CLIENT_ID: 'partner-42', SANDBOX_CLIENT_SECRET: 's3cr3t:with:colons' });
  const ok = await httpRequest(`${base}/oauth2/token`, {
    headers: { ...FORM, authorization: basic('partner-42', 's3cr3t:with:colons') },
    body: 'grant_type=client_credentials&scope=sdk-kyc',
  });
  t.equal(ok.status, 200);
  const old = await httpRequest(`${base}/oauth2/token`, {
    headers: { ...FORM, authorization: GOOD },
    body: 'grant_type=client_credentials&scope=sdk-kyc',
  });
  t.equal(old.status, 401);
});

t.test('a wrong secret, an unknown client or no credentials get 401 invalid_client', async (t) => {
  const { base, logs } = await startSandbox(t);
  for (const authorization of [
    basic(SANDBOX_DEFAULT_CLIENT_ID, 'presented-Secret-9x'),
    basic('someone-else', SANDBOX_DEFAULT_CLIENT_SECRET),
    'Bearer abc',
    undefined,
  ]) {
    const res = await httpRequest(`${base}/oauth2/token`, {
      headers: { ...FORM, ...(authorization ? { authorization } : {}) },
      body: 'grant_type=client_credentials&scope=sdk-kyc',
    });
    t.equal(res.status, 401, String(authorization));
    t.equal(res.json.error, 'invalid_client');
    t.type(res.json.error_description, 'string');
    t.match(res.headers['www-authenticate'], /^Basic /);
  }
  t.notOk(logs.text().includes('presented-Secret-9x'), 'the presented secret is not logged');
});

t.test('a grant type other than client_credentials gets 400 unsupported_grant_type', async (t) => {
  const { base } = await startSandbox(t);
  const res = await httpRequest(`${base}/oauth2/token`, {
    headers: { ...FORM, authorization: GOOD },
    body: 'grant_type=password&scope=sdk-kyc&username=a&password=b',
  });
  t.equal(res.status, 400);
  t.same(res.json, { error: 'unsupported_grant_type', error_description: 'only client_credentials is supported' });
});

t.test('a missing grant type or scope, or a JSON body, gets a 400 OAuth error', async (t) => {
  const { base } = await startSandbox(t);
  const noGrant = await httpRequest(`${base}/oauth2/token`, { headers: { ...FORM, authorization: GOOD }, body: 'scope=sdk-kyc' });
  t.equal(noGrant.status, 400);
  t.equal(noGrant.json.error, 'invalid_request');
  const noScope = await httpRequest(`${base}/oauth2/token`, {
    headers: { ...FORM, authorization: GOOD },
    body: 'grant_type=client_credentials',
  });
  t.equal(noScope.status, 400);
  t.equal(noScope.json.error, 'invalid_scope');
  const json = await httpRequest(`${base}/oauth2/token`, {
    headers: { authorization: GOOD },
    body: { grant_type: 'client_credentials', scope: 'sdk-kyc' },
  });
  t.equal(json.status, 400);
  t.equal(json.json.error, 'invalid_request');
});

const clientKeys = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const PUBLIC_PEM = clientKeys.publicKey.export({ type: 'spki', format: 'pem' }).toString();

/** An RFC 7523 client assertion as the gateway's token client signs it. */
function assertion(base: string, key: KeyObject = clientKeys.privateKey, audience = `${base}/oauth2/token`) {
  const iat = Math.floor(Date.now() / 1000);
  return new SignJWT({})
    .setProtectedHeader({ alg: 'ES256', typ: 'JWT' })
    .setIssuer(SANDBOX_DEFAULT_CLIENT_ID)
    .setSubject(SANDBOX_DEFAULT_CLIENT_ID)
    .setAudience(audience)
    .setJti(randomUUID())
    .setIssuedAt(iat)
    .setExpirationTime(iat + 60)
    .sign(key);
}

const assertionForm = (jwt: string) =>
  new URLSearchParams({
    grant_type: 'client_credentials',
    scope: 'sdk-kyc',
    client_id: SANDBOX_DEFAULT_CLIENT_ID,
    client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
    client_assertion: jwt,
  }).toString();

t.test('a client assertion signed by the configured key gets a token', async (t) => {
  const { base } = await startSandbox(t, { SANDBOX_CLIENT_ASSERTION_PUBLIC_KEY: PUBLIC_PEM });
  const res = await httpRequest(`${base}/oauth2/token`, { headers: FORM, body: assertionForm(await assertion(base)) });
  t.equal(res.status, 200);
  t.equal(decodeJwt(res.json.access_token).sub, SANDBOX_DEFAULT_CLIENT_ID);
});

t.test('a client assertion with another key, another audience, or none configured gets 401', async (t) => {
  const { base } = await startSandbox(t, { SANDBOX_CLIENT_ASSERTION_PUBLIC_KEY: PUBLIC_PEM });
  const stranger = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
  for (const jwt of [await assertion(base, stranger), await assertion(base, undefined, `${base}/somewhere-else`)]) {
    const res = await httpRequest(`${base}/oauth2/token`, { headers: FORM, body: assertionForm(jwt) });
    t.equal(res.status, 401);
    t.equal(res.json.error, 'invalid_client');
  }
  const plain = await startSandbox(t);
  const res = await httpRequest(`${plain.base}/oauth2/token`, { headers: FORM, body: assertionForm(await assertion(plain.base)) });
  t.equal(res.status, 401);
  t.match(res.json.error_description, /not enabled/);
});
