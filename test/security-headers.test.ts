import helmet from '@fastify/helmet';
import Fastify from 'fastify';
import t from 'tap';
import { SECURITY_HEADER_OPTIONS } from '../src/app.js';
import { securityHeaders } from '../src/http/security-headers.js';
import { buildTestApp } from './helpers/app.js';

// The gateway computes its security headers once, at start, instead of letting @fastify/helmet
// rebuild helmet on every request. Whatever @fastify/helmet itself would send with the same
// options must still be on every answer, byte for byte.

/** What @fastify/helmet, applied globally the ordinary way, sends with the gateway's options. */
async function whatFastifyHelmetSends(): Promise<Record<string, string>> {
  const reference = Fastify();
  await reference.register(helmet, SECURITY_HEADER_OPTIONS);
  reference.get('/', async () => ({ ok: true }));
  const res = await reference.inject({ method: 'GET', url: '/' });
  await reference.close();
  const skip = new Set(['content-type', 'content-length', 'date', 'connection', 'keep-alive']);
  return Object.fromEntries(Object.entries(res.headers).filter(([name]) => !skip.has(name)).map(([k, v]) => [k, String(v)]));
}

t.test("every answer carries every header @fastify/helmet would set, with helmet's value", async (t) => {
  const expected = await whatFastifyHelmetSends();
  // Not an empty comparison: the headers that matter most are in the reference set.
  for (const name of ['content-security-policy', 'strict-transport-security', 'x-content-type-options', 'x-frame-options', 'referrer-policy', 'cross-origin-opener-policy']) {
    t.ok(expected[name], `${name} is one of them`);
  }
  const { app } = await buildTestApp(t);
  const answers = {
    'a health check': await app.inject({ method: 'GET', url: '/healthz' }),
    'an unknown route (404)': await app.inject({ method: 'GET', url: '/nowhere' }),
    'a refused submit (400)': await app.inject({ method: 'POST', url: '/v1/underwritings', payload: { nope: true } }),
    'an invalid callback (400)': await app.inject({ method: 'POST', url: '/v1/callbacks/underwriting', payload: 'not json' }),
    'a query of an unknown customer (404)': await app.inject({ method: 'GET', url: '/v1/underwritings/nobody' }),
  };
  for (const [what, res] of Object.entries(answers)) {
    for (const [name, value] of Object.entries(expected)) {
      t.equal(res.headers[name], value, `${what}: ${name}`);
    }
  }
  // /docs keeps its own, looser policy for Swagger UI, and every other header.
  const docs = await app.inject({ method: 'GET', url: '/docs/' });
  t.match(docs.headers['content-security-policy'], /script-src 'self'/);
  for (const [name, value] of Object.entries(expected)) {
    if (name !== 'content-security-policy') t.equal(docs.headers[name], value, `/docs: ${name}`);
  }
});

t.test('options that depend on the request are refused, not computed once with a wrong value', async (t) => {
  t.throws(() => securityHeaders({ enableCSPNonces: true }), /nonces/);
  t.throws(
    () => securityHeaders({ contentSecurityPolicy: { useDefaults: false, directives: { defaultSrc: ["'self'", () => "'nonce-x'"] } } }),
    /computed per request/,
  );
  t.equal(securityHeaders(SECURITY_HEADER_OPTIONS)['content-security-policy'], "default-src 'none';frame-ancestors 'none'");
});
