import t, { type Test } from 'tap';
import { addressMatcher, normalizeAddress } from '../../src/access/addresses.js';
import { allowlistGuard, secretMatches } from '../../src/access/guards.js';
import { buildTestApp, listen } from '../helpers/app.js';
import { httpRequest } from '../helpers/http.js';

t.test('addresses match IPs and CIDRs, IPv4 and IPv6, mapped IPv4 as IPv4', async (t) => {
  const allowed = addressMatcher(['10.0.0.0/8', '192.168.1.5', '2001:db8::/32', '::1/128']);
  t.ok(allowed('10.20.30.40'));
  t.ok(allowed('::ffff:10.20.30.40'), 'IPv4-mapped IPv6 matches its IPv4 form');
  t.ok(allowed('192.168.1.5'));
  t.notOk(allowed('192.168.1.6'));
  t.ok(allowed('2001:db8:1::7'));
  t.ok(allowed('::1'));
  t.notOk(allowed('2001:db9::1'));
  t.notOk(allowed('11.0.0.1'));
  t.notOk(allowed(undefined));
  t.notOk(allowed('garbage'));
  t.equal(normalizeAddress('::FFFF:1.2.3.4'), '1.2.3.4');
  t.ok(addressMatcher(['::ffff:10.0.0.0/104'])('10.9.9.9'), 'a mapped CIDR covers the IPv4 range');
});

t.test('secrets compare in constant time against every candidate', async (t) => {
  t.ok(secretMatches('key-two', ['key-one', 'key-two']));
  t.notOk(secretMatches('key-three', ['key-one', 'key-two']));
  t.notOk(secretMatches(undefined, ['key-one']));
  t.notOk(secretMatches('', []));
});

/** The gateway with one extra route behind an allowlist guard, listening for real peers. */
async function guardedGateway(t: Test, env: Record<string, string>) {
  const gw = await buildTestApp(t, { env });
  gw.app.get('/probe', { onRequest: allowlistGuard('query', gw.config.queryAllowedIps) }, async (request) => ({
    client: request.ip,
  }));
  const base = await listen(gw.app);
  return { ...gw, base };
}

t.test('a real peer outside the allowlist is refused 403 and logged at warn', async (t) => {
  const { base, logs } = await guardedGateway(t, { QUERY_ALLOWED_IPS: '127.0.0.1/32' });
  const inside = await httpRequest(`${base}/probe`);
  t.equal(inside.status, 200);
  t.same(inside.json, { client: '127.0.0.1' });

  const outside = await httpRequest(`${base}/probe`, { localAddress: '127.0.0.2' });
  t.equal(outside.status, 403);
  t.same(outside.json, { error: 'forbidden', message: 'this address may not use this route' });
  const warning = logs.entries().find((e) => e.msg === 'refused: address not in allowlist');
  t.match(warning, { level: 'warn', group: 'query', client: '127.0.0.2', peer: '127.0.0.2' });
});

t.test('a forged X-Forwarded-For from an untrusted peer is ignored', async (t) => {
  const { base } = await guardedGateway(t, { QUERY_ALLOWED_IPS: '127.0.0.1/32' });
  const forged = await httpRequest(`${base}/probe`, {
    localAddress: '127.0.0.2',
    headers: { 'x-forwarded-for': '127.0.0.1' },
  });
  t.equal(forged.status, 403);
});

t.test('without TRUST_PROXY even a loopback peer cannot speak for another client', async (t) => {
  const { base } = await guardedGateway(t, { QUERY_ALLOWED_IPS: '127.0.0.1/32' });
  const res = await httpRequest(`${base}/probe`, { headers: { 'x-forwarded-for': '203.0.113.9' } });
  t.equal(res.status, 200);
  t.same(res.json, { client: '127.0.0.1' }, 'the header is not believed');
});

t.test('X-Forwarded-For from a trusted proxy is honoured, both ways', async (t) => {
  const { base } = await guardedGateway(t, { QUERY_ALLOWED_IPS: '10.1.2.3/32', TRUST_PROXY: '127.0.0.3/32' });
  const allowedClient = await httpRequest(`${base}/probe`, {
    localAddress: '127.0.0.3',
    headers: { 'x-forwarded-for': '10.1.2.3' },
  });
  t.equal(allowedClient.status, 200);
  t.same(allowedClient.json, { client: '10.1.2.3' });

  const refusedClient = await httpRequest(`${base}/probe`, {
    localAddress: '127.0.0.3',
    headers: { 'x-forwarded-for': '10.9.9.9' },
  });
  t.equal(refusedClient.status, 403);

  const proxyItself = await httpRequest(`${base}/probe`, { localAddress: '127.0.0.3' });
  t.equal(proxyItself.status, 403, 'the proxy is not the client');
});

t.test('an IPv6 loopback peer matches ::1/128', async (t) => {
  const gw = await buildTestApp(t, { env: { QUERY_ALLOWED_IPS: '::1/128' } });
  gw.app.get('/probe', { onRequest: allowlistGuard('query', gw.config.queryAllowedIps) }, async (request) => ({
    client: request.ip,
  }));
  const base = await listen(gw.app, '::1');
  const probe = await httpRequest(`${base}/probe`);
  t.equal(probe.status, 200);
  t.same(probe.json, { client: '::1' });
});
