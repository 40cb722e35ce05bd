import { configProblems } from '../helpers/config.js';
import t from 'tap';
import {
  loadSandboxConfig,
  SANDBOX_DEFAULT_ALLOWED_IPS,
  SANDBOX_DEFAULT_CLIENT_ID,
  SANDBOX_DEFAULT_CLIENT_SECRET,
  SANDBOX_DEFAULT_CPFS,
  SANDBOX_DEFAULT_PARTNER_TOKEN,
} from '../../src/sandbox/config.js';
import { startProcess } from '../helpers/process.js';

const problems = (env: Record<string, string>): string[] => configProblems(loadSandboxConfig, env);

/** Mod-11 check digits, as every CPF validator computes them. */
function hasValidCheckDigits(cpf: string): boolean {
  const d = [...cpf].map(Number);
  const check = (n: number) => {
    const sum = d.slice(0, n).reduce((acc, digit, i) => acc + digit * (n + 1 - i), 0);
    return ((sum * 10) % 11) % 10;
  };
  return check(9) === d[9] && check(10) === d[10] && new Set(d).size > 1;
}

t.test('nothing configured gives the documented defaults', async (t) => {
  const c = loadSandboxConfig({});
  t.equal(c.host, '127.0.0.1');
  t.equal(c.port, 4010);
  t.equal(c.callbackUrl, undefined);
  t.equal(c.delayMs, 10_000);
  t.equal(c.partnerToken, SANDBOX_DEFAULT_PARTNER_TOKEN);
  t.match(c.partnerToken, /^[A-Za-z0-9]{64}$/);
  t.equal(c.partnerTokenIsDefault, true);
  t.equal(c.clientId, SANDBOX_DEFAULT_CLIENT_ID);
  t.equal(c.clientSecret, SANDBOX_DEFAULT_CLIENT_SECRET);
  t.equal(c.tokenTtlS, 3600);
  t.same(c.scenarioCpfs, SANDBOX_DEFAULT_CPFS);
  t.same(c.allowedIps, SANDBOX_DEFAULT_ALLOWED_IPS);
  t.equal(c.logLevel, 'info');
  t.ok(Object.isFrozen(c));
});

t.test('the default scenario CPFs are 11 digits with valid check digits', async (t) => {
  for (const cpf of Object.values(SANDBOX_DEFAULT_CPFS)) t.ok(hasValidCheckDigits(cpf), cpf);
});

t.test('each bad variable gets one line naming it and why', async (t) => {
  const lines = problems({
    SANDBOX_PORT: 'forty',
    SANDBOX_DELAY_MS: '-1',
    SANDBOX_PARTNER_TOKEN: 'short',
    SANDBOX_TOKEN_TTL_S: '0',
    SANDBOX_CALLBACK_URL: 'ftp://gateway/cb',
    SANDBOX_CPF_APPROVE: '123.456.789-09',
    SANDBOX_ALLOWED_IPS: '10.0.0.0/40',
    SANDBOX_CLIENT_ASSERTION_PUBLIC_KEY: 'not a key',
    LOG_LEVEL: 'loud',
  });
  t.same(lines.map((l) => l.split(':')[0]).sort(), [
    'LOG_LEVEL',
    'SANDBOX_ALLOWED_IPS',
    'SANDBOX_CALLBACK_URL',
    'SANDBOX_CLIENT_ASSERTION_PUBLIC_KEY',
    'SANDBOX_CPF_APPROVE',
    'SANDBOX_DELAY_MS',
    'SANDBOX_PARTNER_TOKEN',
    'SANDBOX_PORT',
    'SANDBOX_TOKEN_TTL_S',
  ]);
  t.ok(lines.includes('SANDBOX_PARTNER_TOKEN: must be exactly 64 letters or digits'));
  t.ok(lines.includes('SANDBOX_ALLOWED_IPS: not an IP address or CIDR: 10.0.0.0/40'));
});

t.test('two scenarios sharing one CPF is refused', async (t) => {
  t.match(problems({ SANDBOX_CPF_APPROVE: SANDBOX_DEFAULT_CPFS.standardReject }), [/^SANDBOX_CPF_APPROVE: .*must differ/]);
});

t.test('npm run sandbox with a bad variable exits 1 with one line per problem', async (t) => {
  const sandbox = startProcess(t, { SANDBOX_PORT: 'x', SANDBOX_DELAY_MS: 'soon' }, 'src/sandbox/server.ts');
  const { code } = await sandbox.exited;
  t.equal(code, 1);
  t.same(sandbox.stderr, ['SANDBOX_PORT: must be a whole number from 0 to 65535', 'SANDBOX_DELAY_MS: must be a whole number from 0 to 3600000']);
});

t.test('the standalone sandbox logs its settings without any secret, and warns with no callback URL', async (t) => {
  const token = 'Z'.repeat(64);
  const sandbox = startProcess(
    t,
    { SANDBOX_PORT: '0', SANDBOX_PARTNER_TOKEN: token, SANDBOX_CLIENT_SECRET: 'my-client-secret-value' },
    'src/sandbox/server.ts',
  );
  const settings = await sandbox.waitForLog((e) => e.msg === 'sandbox provider settings');
  t.match(settings, {
    host: '127.0.0.1',
    delayMs: 10_000,
    callbackUrl: null,
    partnerTokenSource: 'custom',
    clientSecretSource: 'custom',
    scenarioCpfsSource: 'default',
    clientId: SANDBOX_DEFAULT_CLIENT_ID,
  });
  await sandbox.waitForLog((e) => e.level === 'warn' && /SANDBOX_CALLBACK_URL is not set/.test(e.msg));
  await sandbox.waitForLog((e) => /^sandbox provider listening at http:\/\/127\.0\.0\.1:\d+$/.test(e.msg));
  const all = sandbox.stdout.join('\n');
  t.notOk(all.includes(token));
  t.notOk(all.includes('my-client-secret-value'));
  for (const cpf of Object.values(SANDBOX_DEFAULT_CPFS)) t.notOk(all.includes(cpf), 'no CPF is logged');
  sandbox.child.kill('SIGTERM');
  t.equal((await sandbox.exited).code, 0);
});
