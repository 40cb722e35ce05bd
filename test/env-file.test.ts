import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { closestKnown, KNOWN_VARIABLES, unknownVariableWarnings } from '../src/config/config-names.js';
import { CONFIG_VARIABLES } from '../src/config/config.js';
import { loadEnvFile } from '../src/config/env-file.js';
import { SANDBOX_CONFIG_VARIABLES } from '../src/sandbox/config.js';
import { TEST_CPF_HASH_KEY, TEST_PARTNER_TOKEN } from './helpers/app.js';
import { configProblems } from './helpers/config.js';
import { freshDatabaseUrl, SERVER_URL } from './helpers/database.js';
import { startProcess } from './helpers/process.js';

async function dirWithEnv(t: Test, content: string): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'ugw-envfile-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await writeFile(path.join(dir, '.env'), content);
  return dir;
}

t.test('.env in the working directory is read; the environment wins over it', async (t) => {
  const dir = await dirWithEnv(t, '# a comment\nPORT=4000\nLOG_LEVEL=debug\nCALLBACK_TIMEOUT_S="60"\n');
  const env: NodeJS.ProcessEnv = { LOG_LEVEL: 'warn' };
  const read = loadEnvFile(env, dir);
  t.equal(read.file, path.join(dir, '.env'));
  t.same(read.applied.sort(), ['CALLBACK_TIMEOUT_S', 'PORT']);
  t.same(read.overridden, ['LOG_LEVEL']);
  t.same(env, { LOG_LEVEL: 'warn', PORT: '4000', CALLBACK_TIMEOUT_S: '60' });
});

t.test("a secret the environment gives as NAME_FILE is not taken from .env as NAME (nor NAME_FILE when it gives NAME)", async (t) => {
  const dir = await dirWithEnv(t, 'SANDBOX_CLIENT_SECRET=sandbox-client-secret\nCPF_HASH_KEY_FILE=/run/secrets/cpf\nPORT=4000\n');
  const env: NodeJS.ProcessEnv = { SANDBOX_CLIENT_SECRET_FILE: '/run/secrets/sandbox', CPF_HASH_KEY: 'k'.repeat(32) };
  const read = loadEnvFile(env, dir);
  t.same(read.applied, ['PORT']);
  t.same(read.overridden.sort(), ['CPF_HASH_KEY_FILE', 'SANDBOX_CLIENT_SECRET']);
  t.same(env, { SANDBOX_CLIENT_SECRET_FILE: '/run/secrets/sandbox', CPF_HASH_KEY: 'k'.repeat(32), PORT: '4000' });
});

t.test('no .env: nothing read, no error', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'ugw-envfile-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const env: NodeJS.ProcessEnv = {};
  t.same(loadEnvFile(env, dir), { file: undefined, applied: [], overridden: [] });
  t.same(env, {});
});

t.test('with NODE_ENV=production, .env is not read unless ENV_FILE names it', async (t) => {
  const dir = await dirWithEnv(t, 'PORT=4000\n');
  const production: NodeJS.ProcessEnv = { NODE_ENV: 'production' };
  t.same(loadEnvFile(production, dir).applied, []);
  t.equal(production.PORT, undefined);
  const asked: NodeJS.ProcessEnv = { NODE_ENV: 'production', ENV_FILE: '.env' };
  t.same(loadEnvFile(asked, dir).applied, ['PORT']);
  t.equal(asked.PORT, '4000');
});

t.test('ENV_FILE names another file; empty reads none; an unreadable one is a configuration error', async (t) => {
  const dir = await dirWithEnv(t, 'PORT=4000\n');
  await writeFile(path.join(dir, 'other.env'), 'PORT=5000\n');
  const other: NodeJS.ProcessEnv = { ENV_FILE: path.join(dir, 'other.env') };
  loadEnvFile(other, dir);
  t.equal(other.PORT, '5000');
  const none: NodeJS.ProcessEnv = { ENV_FILE: '' };
  loadEnvFile(none, dir);
  t.equal(none.PORT, undefined);
  t.same(configProblems(() => loadEnvFile({ ENV_FILE: 'missing.env' }, dir), {}), ['ENV_FILE: cannot read missing.env (ENOENT)']);
});

t.test('a misspelt variable with one of our prefixes is named with the closest setting, never its value', async (t) => {
  const warnings = unknownVariableWarnings({
    CPF_HASH_KEYS: 'secret-value-1',
    EVENT_WEBHOOK_URL: 'https://x',
    DATABASE_HOST: 'db',
    CPF_HASH_KEY: 'known',
    PORT: '1',
    OTEL_SERVICE_NAME: 'standard',
    NODE_OPTIONS: '--x',
    SANDBOX_SERVICE_HOST: '10.0.0.1',
    SANDBOX_PORT_4010_TCP_ADDR: '10.0.0.1',
    HOME: '/root',
  });
  t.same(warnings, [
    'CPF_HASH_KEYS is not a setting; did you mean CPF_HASH_KEY?',
    'DATABASE_HOST is not a setting (docs/configuration.md lists them)',
    'EVENT_WEBHOOK_URL is not a setting; did you mean EVENT_WEBHOOK_URLS?',
  ]);
  t.equal(closestKnown('PARTNER_TOKEN_FLIE'), 'PARTNER_TOKEN_FILE', 'the _FILE forms are settings too');
});

t.test('the known names come from the configuration schemas: every variable there is known', async (t) => {
  for (const name of [...CONFIG_VARIABLES, ...SANDBOX_CONFIG_VARIABLES]) t.ok(KNOWN_VARIABLES.has(name), name);
  t.same(unknownVariableWarnings(Object.fromEntries([...KNOWN_VARIABLES].map((n) => [n, 'x']))), [], 'no known name is warned about');
});

t.test('the gateway reads ENV_FILE at start and warns about a misspelt variable by name', async (t) => {
  const dir = await dirWithEnv(t, `CPF_HASH_KEYS=planted-secret-value-0123456789\nCALLBACK_TIMEOUT_S=60\n`);
  const env: Record<string, string> = {
    ENV_FILE: path.join(dir, '.env'),
    HOST: '127.0.0.1',
    PORT: '0',
    DATA_DIR: dir,
    PROVIDER_BASE_URL: 'http://127.0.0.1:9',
    PARTNER_TOKEN: TEST_PARTNER_TOKEN,
    CPF_HASH_KEY: TEST_CPF_HASH_KEY,
  };
  if (SERVER_URL) env.DATABASE_URL = await freshDatabaseUrl(t);
  const gateway = startProcess(t, env);
  await gateway.listening();
  const read = await gateway.waitForLog((e) => e.msg === 'read settings from an env file');
  t.same([...(read.applied as string[])].sort(), ['CALLBACK_TIMEOUT_S', 'CPF_HASH_KEYS']);
  const warning = await gateway.waitForLog((e) => typeof e.msg === 'string' && e.msg.startsWith('CPF_HASH_KEYS'));
  t.match(warning, { level: 'warn', msg: 'CPF_HASH_KEYS is not a setting; did you mean CPF_HASH_KEY?' });
  t.notMatch(gateway.stdout.join('\n'), 'planted-secret-value', 'the value is never logged');
});

t.test('a start that fails on its configuration still names the misspelt variable that explains it', async (t) => {
  const env: Record<string, string> = {
    HOST: '127.0.0.1',
    PORT: '0',
    PROVIDER_BASE_URL: 'http://127.0.0.1:9',
    PARTNER_TOKN: TEST_PARTNER_TOKEN,
    CPF_HASH_KEY: TEST_CPF_HASH_KEY,
    LOG_FORMAT: 'pretty',
  };
  const gateway = startProcess(t, env);
  t.equal((await gateway.exited).code, 1, 'exit 1');
  t.ok(gateway.stderr.some((l) => /^PARTNER_TOKEN: /.test(l)), 'the missing variable is named');
  t.ok(gateway.stderr.includes('PARTNER_TOKN is not a setting; did you mean PARTNER_TOKEN?'), 'and the misspelt one, with the closest name');
  t.notMatch(gateway.stderr.join('\n'), TEST_PARTNER_TOKEN, 'never the value');
});
