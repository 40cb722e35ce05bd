import { configProblems } from './helpers/config.js';
import t from 'tap';
import { DEV_CPF_HASH_KEY, loadConfig } from '../src/config/config.js';
import { startProcess } from './helpers/process.js';

const problems = (env: Record<string, string>): string[] => configProblems(loadConfig, env);

t.test('nothing configured gives the contract defaults and sandbox mode', async (t) => {
  const c = loadConfig({});
  t.equal(c.host, '0.0.0.0');
  t.equal(c.port, 3000);
  t.equal(c.databaseUrl, undefined);
  t.equal(c.dataDir, './data');
  t.equal(c.migrateOnStart, true);
  t.equal(c.upstreamTimeoutMs, 10000);
  t.same(c.submitAllowedIps, ['127.0.0.1/32', '::1/128']);
  t.same(c.callbackAllowedIps, ['127.0.0.1/32', '::1/128']);
  t.same(c.queryAllowedIps, ['127.0.0.1/32', '::1/128']);
  t.same(c.queryApiKeys, []);
  t.same(c.trustProxy, []);
  t.equal(c.callbackTimeoutS, 3600);
  t.equal(c.cpfHashKey, DEV_CPF_HASH_KEY);
  t.equal(c.cpfHashKeyIsDevelopmentDefault, true);
  t.equal(c.tokenClient, undefined);
  t.equal(c.logLevel, 'info');
  t.equal(c.sandboxMode, true);
  t.ok(Object.isFrozen(c));
});

t.test('values are coerced and lists split', async (t) => {
  const c = loadConfig({
    PORT: '8080',
    MIGRATE_ON_START: 'false',
    SUBMIT_ALLOWED_IPS: '10.0.0.0/8, 192.168.1.5 ,2001:db8::/32',
    QUERY_API_KEYS: 'key-aaaaaaaaaaaaaaaa,key-bbbbbbbbbbbbbbbb',
    PROVIDER_BASE_URL: 'https://provider.example/',
    PARTNER_TOKEN: 'a'.repeat(64),
  });
  t.equal(c.port, 8080);
  t.equal(c.migrateOnStart, false);
  t.same(c.submitAllowedIps, ['10.0.0.0/8', '192.168.1.5', '2001:db8::/32']);
  t.same(c.queryApiKeys, ['key-aaaaaaaaaaaaaaaa', 'key-bbbbbbbbbbbbbbbb']);
  t.equal(c.providerBaseUrl, 'https://provider.example', 'trailing slash dropped');
  t.equal(c.sandboxMode, false);
});

t.test('each bad variable gets one line naming it and why', async (t) => {
  const lines = problems({
    PORT: 'eighty',
    UPSTREAM_TIMEOUT_MS: '-5',
    SUBMIT_ALLOWED_IPS: '10.0.0.0/33,not-an-ip',
    MIGRATE_ON_START: 'maybe',
    LOG_LEVEL: 'loud',
  });
  t.equal(lines.length, 5);
  t.match(lines.join('\n'), /^PORT: must be a whole number from 0 to 65535$/m);
  t.match(lines.join('\n'), /^UPSTREAM_TIMEOUT_MS: must be a positive whole number \(100 to 120000\)$/m);
  t.match(lines.join('\n'), /^SUBMIT_ALLOWED_IPS: not an IP address or CIDR: 10\.0\.0\.0\/33, not-an-ip$/m);
  t.match(lines.join('\n'), /^MIGRATE_ON_START: must be true or false$/m);
  t.match(lines.join('\n'), /^LOG_LEVEL: /m);
});

t.test('a negative or fractional number is told it must be a positive whole number, with its range', async (t) => {
  t.same(problems({ UPSTREAM_TIMEOUT_MS: '-5', CALLBACK_TIMEOUT_S: '1.5', PORT: '-1' }), [
    'PORT: must be a whole number from 0 to 65535',
    'UPSTREAM_TIMEOUT_MS: must be a positive whole number (100 to 120000)',
    'CALLBACK_TIMEOUT_S: must be a positive whole number (1 to 2592000)',
  ]);
});

t.test('a bad secret is named but its value is never echoed', async (t) => {
  const token = 'short-secret-token-value';
  const lines = problems({ PARTNER_TOKEN: token, CALLBACK_SECRET: 'tiny', CPF_HASH_KEY: 'also-a-short-key' });
  t.same(lines.map((l) => l.split(':')[0]).sort(), ['CALLBACK_SECRET', 'CPF_HASH_KEY', 'PARTNER_TOKEN']);
  for (const secret of [token, 'tiny', 'also-a-short-key']) t.notMatch(lines.join('\n'), secret);
});

t.test('production refuses to start without its required variables', async (t) => {
  const lines = problems({ NODE_ENV: 'production' });
  t.same(
    lines.map((l) => l.split(':')[0]),
    ['DATABASE_URL', 'PROVIDER_BASE_URL', 'PARTNER_TOKEN', 'CPF_HASH_KEY', 'CALLBACK_ALLOWED_IPS'],
  );
  const ok = loadConfig({
    NODE_ENV: 'production',
    DATABASE_URL: 'postgres://db/gw',
    PROVIDER_BASE_URL: 'https://provider.example',
    PARTNER_TOKEN: 'b'.repeat(64),
    CPF_HASH_KEY: 'k'.repeat(40),
    CALLBACK_ALLOWED_IPS: '203.0.113.0/24',
  });
  t.equal(ok.sandboxMode, false, 'production never enters sandbox mode');
});

t.test('in production, a malformed variable and the required ones missing are told together, in one start', async (t) => {
  const lines = problems({ NODE_ENV: 'production', PORT: 'eighty', PARTNER_TOKEN: 'short', CPF_HASH_KEY_FILE: '/nonexistent/cpf-key' });
  t.same(
    lines.map((l) => l.slice(0, l.search(/[ :]/))).sort(),
    ['CALLBACK_ALLOWED_IPS', 'CPF_HASH_KEY_FILE', 'DATABASE_URL', 'PARTNER_TOKEN', 'PORT', 'PROVIDER_BASE_URL'],
    'each bad or missing variable once: a malformed one is not also told missing, nor one whose _FILE failed',
  );
  t.ok(lines.includes('DATABASE_URL: required when NODE_ENV=production'));
  t.notMatch(lines.join('\n'), /short/, 'the malformed secret is not echoed');
  // Outside production nothing is required: only the malformed variable.
  t.same(problems({ PORT: 'eighty' }), ['PORT: must be a whole number from 0 to 65535']);
});

t.test('token client variables come together', async (t) => {
  t.match(problems({ AUTH_URL: 'https://auth.example' }).join('\n'), /CLIENT_ID: required/);
  t.match(problems({ AUTH_URL: 'https://auth.example', CLIENT_ID: 'id' }).join('\n'), /CLIENT_SECRET: required/);
  t.match(problems({ CLIENT_ASSERTION_KEY: 'not a pem', AUTH_URL: 'https://a', CLIENT_ID: 'id' }).join('\n'), /CLIENT_ASSERTION_KEY: must be a PKCS#8 PEM/);
  const c = loadConfig({ AUTH_URL: 'https://auth.example/', CLIENT_ID: 'id', CLIENT_SECRET: 's3cret' });
  t.same(c.tokenClient, { authUrl: 'https://auth.example', clientId: 'id', clientSecret: 's3cret', scope: 'sdk-kyc', assertionKey: undefined });
});

t.test('the server exits 1 with one line per bad variable', async (t) => {
  const proc = startProcess(t, { PORT: 'x', PARTNER_TOKEN: 'leaky-token-value', DATABASE_URL: 'mysql://nope' });
  const { code } = await proc.exited;
  t.equal(code, 1);
  const err = proc.stderr.join('\n');
  t.match(err, /^PORT: /m);
  t.match(err, /^PARTNER_TOKEN: /m);
  t.match(err, /^DATABASE_URL: /m);
  t.equal(proc.stderr.length, 3, 'exactly one line per bad variable');
  t.notMatch(err, 'leaky-token-value');
});

t.test('the client assertion key must be an RSA or P-256 PKCS#8 key', async (t) => {
  const { generateKeyPairSync } = await import('node:crypto');
  const pem = (type: 'rsa' | 'ec' | 'ed25519', extra: object = {}) =>
    (generateKeyPairSync as any)(type, { ...extra, privateKeyEncoding: { type: 'pkcs8', format: 'pem' }, publicKeyEncoding: { type: 'spki', format: 'pem' } }).privateKey as string;
  const base = { AUTH_URL: 'https://auth.example', CLIENT_ID: 'id' };
  t.same(problems({ ...base, CLIENT_ASSERTION_KEY: pem('rsa', { modulusLength: 2048 }) }), []);
  t.same(problems({ ...base, CLIENT_ASSERTION_KEY: pem('ec', { namedCurve: 'P-256' }).replace(/\n/g, '\\n') }), [], 'escaped newlines accepted');
  t.match(problems({ ...base, CLIENT_ASSERTION_KEY: pem('ed25519') }).join('\n'), /^CLIENT_ASSERTION_KEY: .*RSA or EC P-256$/m);
});

t.test('CPF_HASH_KEY may be a list: the first key hashes, all of them match', async (t) => {
  const first = 'new-cpf-hash-key-0123456789abcdefghij';
  const second = 'old-cpf-hash-key-0123456789abcdefghij';
  const c = loadConfig({ CPF_HASH_KEY: ` ${first} , ${second} ` });
  t.equal(c.cpfHashKey, first);
  t.same(c.cpfHashKeys, [first, second]);
  t.same(loadConfig({}).cpfHashKeys, [DEV_CPF_HASH_KEY]);
  t.same(problems({ CPF_HASH_KEY: `${first},short` }), ['CPF_HASH_KEY: every key must be at least 32 characters']);
  t.same(problems({ CPF_HASH_KEY: `${first},${first}` }), ['CPF_HASH_KEY: must not repeat a key']);
});

t.test('ADMIN_API_KEYS: a comma list of 16+ character keys, none of them a query key', async (t) => {
  t.same(loadConfig({}).adminApiKeys, []);
  t.same(loadConfig({ ADMIN_API_KEYS: 'admin-aaaaaaaaaaaaaaaa, admin-bbbbbbbbbbbbbbbb' }).adminApiKeys, [
    'admin-aaaaaaaaaaaaaaaa',
    'admin-bbbbbbbbbbbbbbbb',
  ]);
  t.same(problems({ ADMIN_API_KEYS: 'admin-aaaaaaaaaaaaaaaa,tiny' }), ['ADMIN_API_KEYS: every key must be at least 16 characters']);
  t.same(problems({ ADMIN_API_KEYS: ' , ' }), ['ADMIN_API_KEYS: must hold at least one key']);
  t.same(problems({ ADMIN_API_KEYS: 'shared-key-aaaaaaaaaaaa', QUERY_API_KEYS: 'shared-key-aaaaaaaaaaaa' }), [
    'ADMIN_API_KEYS: must not repeat a key of QUERY_API_KEYS',
  ]);
});

t.test('outcome event and correlation settings: defaults, and the webhook secret required with the URLs', async (t) => {
  const c = loadConfig({});
  t.equal(c.correlationSkewS, 300);
  t.equal(c.eventWebhooks, undefined);
  t.equal(c.eventRetryHorizonS, 259200);

  const secret = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
  const configured = loadConfig({
    EVENT_WEBHOOK_URLS: 'https://user:pw@los.internal/hooks?token=abc, http://127.0.0.1:9000/in',
    EVENT_WEBHOOK_SECRET: secret,
    EVENT_WEBHOOK_TIMEOUT_MS: '2500',
    EVENT_RETRY_HORIZON_S: '60',
    CORRELATION_SKEW_S: '0',
  });
  t.same(configured.eventWebhooks, {
    urls: ['https://user:pw@los.internal/hooks?token=abc', 'http://127.0.0.1:9000/in'],
    secret,
    timeoutMs: 2500,
  });
  t.equal(configured.eventRetryHorizonS, 60);
  t.equal(configured.correlationSkewS, 0);

  t.same(problems({ EVENT_WEBHOOK_URLS: 'http://127.0.0.1:9000/in' }), ['EVENT_WEBHOOK_SECRET: required when EVENT_WEBHOOK_URLS is set']);
  const bad = [
    'whsec_',
    'not-a-secret',
    `whsec_${Buffer.alloc(16, 1).toString('base64')}`, // too short
    `whsec_${Buffer.alloc(65, 1).toString('base64')}`, // too long
    `whsec_${Buffer.alloc(32, 1).toString('base64')}!`,
  ];
  for (const value of bad) {
    const lines = problems({ EVENT_WEBHOOK_URLS: 'http://127.0.0.1:9000/in', EVENT_WEBHOOK_SECRET: value });
    t.same(lines.map((l) => l.split(':')[0]), ['EVENT_WEBHOOK_SECRET'], `refused: ${value.length} characters`);
    if (value.length > 'whsec_'.length) t.notOk(lines.join('\n').includes(value), 'the value is not echoed');
  }
  const urls = problems({ EVENT_WEBHOOK_URLS: 'ftp://user:hunter2hunter2@x/, http://ok/', EVENT_WEBHOOK_SECRET: secret });
  t.same(urls.map((l) => l.split(':')[0]), ['EVENT_WEBHOOK_URLS']);
  t.notMatch(urls.join('\n'), 'hunter2', 'a refused URL is not echoed: it may carry a secret');
  const metadata = problems({ EVENT_WEBHOOK_URLS: 'http://169.254.169.254/latest/, http://ok/', EVENT_WEBHOOK_SECRET: secret });
  t.same(metadata, ['EVENT_WEBHOOK_URLS: 1 entry(ies) must not point at a link-local or unspecified address (169.254.0.0/16, fe80::/10, 0.0.0.0/8, ::)'], 'a link-local receiver is refused at start, as through the API');
});

t.test('a connection string pg cannot parse is a configuration error naming the variable, never the password', async (t) => {
  const bad = 'postgres://gw:pa#ss-planted@db.internal:5432/gw';
  t.same(problems({ DATABASE_URL: 'postgres://db/gw', DATABASE_LISTEN_URL: bad }), [
    'DATABASE_LISTEN_URL: is not a valid URL: percent-encode special characters (# / ? @ :) in the user name and password',
  ]);
  t.same(problems({ DATABASE_URL: bad }), [
    'DATABASE_URL: is not a valid URL: percent-encode special characters (# / ? @ :) in the user name and password',
  ]);
  for (const ok of ['postgres://gw:pa%23ss@db.internal:5432/gw', 'postgres://gw:p@ss@db/gw', 'postgresql://gw@/gw?host=/var/run/postgresql', 'postgres://gw:a b@db/gw']) {
    t.same(problems({ DATABASE_URL: ok }), [], ok);
  }
});
