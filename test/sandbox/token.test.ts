import { createLocalJWKSet, decodeJwt, decodeProtectedHeader, jwtVerify } from 'jose';
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
