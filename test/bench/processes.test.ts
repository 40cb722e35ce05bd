import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t from 'tap';
import { startChild } from '../../bench/lib/processes.js';

// The bench's children (gateways, baselines, the sandbox) listen on a port freePort() found free;
// another process may take it before the child listens (parallel test files in CI: "PORT: port
// 44555 on 127.0.0.1 is already in use", test/bench/campaign.test.ts). startChild then starts the
// child again on another port; any other failure at start is reported as it was.

const dir = mkdtempSync(path.join(tmpdir(), 'ugw-processes-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

/** A child that logs each port it is given to ATTEMPTS; fails as FAIL says on its first start, then serves. */
const script = path.join(dir, 'child.mjs');
writeFileSync(
  script,
  `import { createServer } from 'node:http';
import { appendFileSync, readFileSync } from 'node:fs';
const seen = readFileSync(process.env.ATTEMPTS, 'utf8');
appendFileSync(process.env.ATTEMPTS, process.env.PORT + '\\n');
if (seen === '' || process.env.FAIL_ALWAYS === '1') {
  console.error(process.env.FAIL.replace('{port}', process.env.PORT));
  process.exit(1);
}
createServer((req, res) => res.end('ok')).listen(Number(process.env.PORT), '127.0.0.1');
`,
);

function attemptsFile(name: string): string {
  const file = path.join(dir, name);
  writeFileSync(file, '');
  return file;
}

const ports = (file: string) => readFileSync(file, 'utf8').trim().split('\n');

t.test('a child whose port was taken before it listened is started again on another port', async (t) => {
  const attempts = attemptsFile('taken');
  const child = await startChild({
    name: 'child',
    script,
    env: { ATTEMPTS: attempts, FAIL: '{"level":"fatal","msg":"PORT: port {port} on 127.0.0.1 is already in use (another process listens there)"}' },
    readyPath: '/',
  });
  t.teardown(() => child.stop());
  const tried = ports(attempts);
  t.equal(tried.length, 2, 'two starts');
  t.not(tried[0], tried[1], 'on two ports');
  t.equal(child.baseUrl, `http://127.0.0.1:${tried[1]}`, 'the second is the one used');
});

t.test('a child that fails at start for another reason is not started again', async (t) => {
  const attempts = attemptsFile('other');
  await t.rejects(startChild({ name: 'child', script, env: { ATTEMPTS: attempts, FAIL: 'boom: CALLBACK_SECRET is too short' }, readyPath: '/' }), /child exited during start:\n.*boom/s);
  t.equal(ports(attempts).length, 1, 'one start');
});

t.test('a port taken every time is given up after three starts', async (t) => {
  const attempts = attemptsFile('always');
  await t.rejects(
    startChild({ name: 'child', script, env: { ATTEMPTS: attempts, FAIL_ALWAYS: '1', FAIL: 'Error: listen EADDRINUSE: address already in use 127.0.0.1:{port}' }, readyPath: '/' }),
    /EADDRINUSE/,
  );
  t.equal(ports(attempts).length, 3, 'three starts');
});

