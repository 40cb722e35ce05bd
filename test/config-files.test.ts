import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { loadConfig, SECRET_VARIABLES } from '../src/config/config.js';
import { loadSandboxConfig } from '../src/sandbox/config.js';
import { configProblems } from './helpers/config.js';

// Secrets as files (<NAME>_FILE), as Docker and Kubernetes secrets are mounted.

async function secretDir(t: Test): Promise<(name: string, content: string) => Promise<string>> {
  const dir = await mkdtemp(path.join(tmpdir(), 'ugw-secrets-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return async (name, content) => {
    const file = path.join(dir, name);
    await writeFile(file, content);
    return file;
  };
}

const WEBHOOK_SECRET = `whsec_${Buffer.alloc(32, 9).toString('base64')}`;
/** A valid value of every secret, with what else it needs to be accepted. */
const VALID: Record<(typeof SECRET_VARIABLES)[number], string> = {
  PARTNER_TOKEN: 'P'.repeat(64),
  CPF_HASH_KEY: 'cpf-hash-key-from-a-file-0123456789abcdef',
  CALLBACK_SECRET: 'callback-secret-from-a-file',
  QUERY_API_KEYS: 'query-key-from-a-file-01,query-key-from-a-file-02',
  ADMIN_API_KEYS: 'admin-key-from-a-file-01',
  CLIENT_SECRET: 'client-secret-from-a-file',
  CLIENT_ASSERTION_KEY: '',
  EVENT_WEBHOOK_SECRET: WEBHOOK_SECRET,
  DATABASE_URL: 'postgres://gateway:pw-from-a-file@db.internal:5432/gateway',
  DATABASE_LISTEN_URL: 'postgres://gateway:pw-from-a-file@db-direct.internal:5432/gateway',
};
const COMPANIONS = {
  PROVIDER_BASE_URL: 'https://provider.example',
  AUTH_URL: 'https://auth.example',
  CLIENT_ID: 'client',
  EVENT_WEBHOOK_URLS: 'https://los.internal/hooks',
};

t.test('every secret may be given as <NAME>_FILE; the trailing newline is dropped', async (t) => {
  const { generateKeyPairSync } = await import('node:crypto');
  const pem = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const values = { ...VALID, CLIENT_ASSERTION_KEY: pem };
  const write = await secretDir(t);
  const env: Record<string, string> = { ...COMPANIONS };
  for (const [name, value] of Object.entries(values)) env[`${name}_FILE`] = await write(name, `${value}\n`);
  const c = loadConfig(env);
  t.equal(c.partnerToken, values.PARTNER_TOKEN);
  t.equal(c.cpfHashKey, values.CPF_HASH_KEY);
  t.equal(c.callbackSecret, values.CALLBACK_SECRET);
  t.same(c.queryApiKeys, values.QUERY_API_KEYS.split(','));
  t.same(c.adminApiKeys, [values.ADMIN_API_KEYS]);
  t.equal(c.tokenClient?.clientSecret, values.CLIENT_SECRET);
  t.equal(c.tokenClient?.assertionKey, pem.trim());
  t.equal(c.eventWebhooks?.secret, WEBHOOK_SECRET);
  t.equal(c.databaseUrl, values.DATABASE_URL);
  t.equal(c.databaseListenUrl, values.DATABASE_LISTEN_URL);
  t.same(Object.keys(values).sort(), [...SECRET_VARIABLES].sort(), 'every secret was tried');
});

t.test('setting a secret and its _FILE is one line naming the variable, never the value', async (t) => {
  const write = await secretDir(t);
  const lines = configProblems(loadConfig, { PARTNER_TOKEN: VALID.PARTNER_TOKEN, PARTNER_TOKEN_FILE: await write('token', VALID.PARTNER_TOKEN), ...COMPANIONS });
  t.same(lines, ['PARTNER_TOKEN_FILE: PARTNER_TOKEN is set too; set only one of them']);
});

t.test('an unreadable or empty secret file is a configuration error naming the variable', async (t) => {
  const write = await secretDir(t);
  const locked = await write('locked', VALID.CPF_HASH_KEY);
  await chmod(locked, 0o000);
  const empty = await write('empty', '\n');
  const missing = path.join(path.dirname(empty), 'partner-token');
  const lines = configProblems(loadConfig, {
    PARTNER_TOKEN_FILE: missing,
    CALLBACK_SECRET_FILE: empty,
    ...(process.getuid?.() === 0 ? {} : { CPF_HASH_KEY_FILE: locked }),
    PORT: 'eighty',
  });
  t.match(lines, [
    `PARTNER_TOKEN_FILE: cannot read ${missing} (ENOENT)`,
    ...(process.getuid?.() === 0 ? [] : [/^CPF_HASH_KEY_FILE: cannot read .*locked \(EACCES\)$/]),
    `CALLBACK_SECRET_FILE: ${empty} is empty`,
    'PORT: must be a whole number from 0 to 65535',
  ], 'with the other bad variables, one line each');
});

t.test('a secret set as its _FILE by mistake (the value, not a path) is never echoed', async (t) => {
  const lines = configProblems(loadConfig, {
    DATABASE_URL_FILE: 'postgres://gw:planted-password@db.internal:5432/gw',
    PARTNER_TOKEN_FILE: VALID.PARTNER_TOKEN,
  });
  t.equal(lines.length, 2, 'one line each');
  t.match(lines[0], /^PARTNER_TOKEN_FILE: cannot read /);
  t.match(lines[1], /^DATABASE_URL_FILE: cannot read /);
  t.notMatch(lines.join('\n'), 'planted-password');
  t.notMatch(lines.join('\n'), VALID.PARTNER_TOKEN);
  // base64 tokens may start with /: one with more slashes, one with none after the first.
  for (const token of ['/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAMCAgM', '/Zm9vYmFyYmF6cXV4cXV1eHF1dXhxdXV4cXV1eA==']) {
    const [line] = configProblems(loadConfig, { PARTNER_TOKEN_FILE: token });
    t.match(line, /^PARTNER_TOKEN_FILE: cannot read the file it names/);
    t.notMatch(line, token.slice(1, 12), 'a token starting with / is not echoed either');
  }
  t.match(configProblems(loadConfig, { PARTNER_TOKEN_FILE: '/nonexistent/partner-token' })[0], /^PARTNER_TOKEN_FILE: cannot read the file it names/, 'nor a path in no directory there is');
});

t.test("a secret file's bad value is named with its file, and never echoed", async (t) => {
  const write = await secretDir(t);
  const lines = configProblems(loadConfig, { CALLBACK_SECRET_FILE: await write('short', 'tiny-secret\n') });
  t.same(lines, ['CALLBACK_SECRET (from CALLBACK_SECRET_FILE): must be at least 16 characters']);
});

t.test("the sandbox's secrets may be files too", async (t) => {
  const write = await secretDir(t);
  const token = 'S'.repeat(64);
  const c = loadSandboxConfig({ SANDBOX_PARTNER_TOKEN_FILE: await write('t', `${token}\n`), SANDBOX_CLIENT_SECRET_FILE: await write('c', 'sandbox-secret\n') });
  t.equal(c.partnerToken, token);
  t.equal(c.clientSecret, 'sandbox-secret');
  t.equal(c.partnerTokenIsDefault, false);
  t.same(configProblems(loadSandboxConfig, { SANDBOX_PARTNER_TOKEN: token, SANDBOX_PARTNER_TOKEN_FILE: await write('t2', token) }), [
    'SANDBOX_PARTNER_TOKEN_FILE: SANDBOX_PARTNER_TOKEN is set too; set only one of them',
  ]);
});
