import t, { type Test } from 'tap';
import { loadConfig } from '../src/config/config.js';
import { defaultLogFormat } from '../src/observability/logger.js';
import { SANDBOX_MODE_BANNER, SANDBOX_MODE_WARNING } from '../src/sandbox/mode.js';
import { configProblems } from './helpers/config.js';
import { migratedStorage } from './helpers/database.js';
import { startProcess } from './helpers/process.js';

t.test('logs are readable in development on a terminal, JSON everywhere else', async (t) => {
  t.equal(defaultLogFormat('development', true), 'pretty');
  t.equal(defaultLogFormat(undefined, true), 'pretty', 'NODE_ENV unset is development');
  t.equal(defaultLogFormat('development', false), 'json', 'piped or captured: JSON');
  t.equal(defaultLogFormat('production', true), 'json');
  t.equal(defaultLogFormat('test', true), 'json');
});

t.test('LOG_FORMAT chooses json or pretty, and nothing else', async (t) => {
  t.equal(loadConfig({ LOG_FORMAT: 'pretty' }).logFormat, 'pretty');
  t.equal(loadConfig({}).logFormat, undefined);
  t.same(configProblems(loadConfig, { LOG_FORMAT: 'loud' }), ['LOG_FORMAT: must be json or pretty']);
});

/** A gateway in sandbox mode with LOG_FORMAT=pretty, once it listens: its process, its output so far, its URL. */
async function prettyGateway(t: Test) {
  const env: Record<string, string> = { HOST: '127.0.0.1', PORT: '0', SANDBOX_PORT: '0', LOG_FORMAT: 'pretty', ...(await migratedStorage(t, 'ugw-log-format-')) };
  const gateway = startProcess(t, env);
  const text = () => gateway.stdout.join('\n');
  const url = await new Promise<string>((resolve, reject) => {
    const check = () => {
      const listening = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(text());
      if (listening) resolve(listening[1]!);
    };
    gateway.child.stdout!.on('data', () => setImmediate(check));
    void gateway.exited.then(() => reject(new Error(`exited first: ${gateway.stderr.join('\n')}`)));
    check();
  });
  return { gateway, text, url };
}

t.test('with LOG_FORMAT=pretty the gateway writes readable lines, the sandbox warning under a banner', async (t) => {
  const { gateway, text } = await prettyGateway(t);
  t.match(text(), `WARN: ${SANDBOX_MODE_BANNER}\n${SANDBOX_MODE_WARNING}`, 'the banner, then the warning');
  t.match(text(), /INFO: database opened/);
  t.notOk(gateway.stdout.some((line) => line.startsWith('{')), 'no JSON lines');
  gateway.child.kill('SIGTERM');
  t.equal((await gateway.exited).code, 0);
});

t.test('with LOG_FORMAT=pretty and its output closed (npm start | head), the gateway still serves and stops at once on SIGTERM', async (t) => {
  // pino's pretty transport (a worker thread) never drained into a closed pipe, and every exit
  // waited out its 10 s of flush timeouts: past the shutdown's own 10 s grace.
  const { gateway, url } = await prettyGateway(t);
  gateway.child.stdout!.destroy();
  for (let i = 0; i < 3; i++) {
    const answer = await fetch(`${url}/healthz`);
    t.equal(answer.status, 200, 'served with every log line going nowhere');
  }
  const signalled = Date.now();
  gateway.child.kill('SIGTERM');
  const exit = await Promise.race([gateway.exited, new Promise<'late'>((resolve) => setTimeout(resolve, 5_000, 'late').unref())]);
  t.not(exit, 'late', `exited within 5 s of SIGTERM (${Date.now() - signalled} ms)`);
  if (exit !== 'late') t.equal(exit.code, 0, 'a clean exit');
});
