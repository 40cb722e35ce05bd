import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import t from 'tap';
import { GATEWAY_NODE_ARGS } from '../src/config/node-flags.js';
import { ROOT } from './helpers/root.js';

// The gateway's Node flags (its memory under load: docs/performance-history.md) are written in three places:
// `npm start`, the Docker image's CMD, and the bench harnesses' GATEWAY_NODE_ARGS (which start it
// as `npm start` would). They must say the same, and Node must accept them.

const read = (path: string) => readFileSync(`${ROOT}${path}`, 'utf8');
const ENTRY = 'dist/src/server.js';

function npmStart(): string[] {
  const start = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts.start!;
  const command = start.split('&&').at(-1)!.trim().split(/\s+/);
  return command.slice(1, command.indexOf(ENTRY));
}

function dockerCmd(): string[] {
  const line = read('Dockerfile')
    .split('\n')
    .find((l) => l.startsWith('CMD '))!;
  const command = JSON.parse(line.slice('CMD '.length)) as string[];
  return command.slice(1, command.indexOf(ENTRY));
}

t.test('npm start, the Docker image and the bench harnesses run the gateway with the same Node flags', async (t) => {
  const flags = npmStart();
  t.ok(flags.length > 0, `npm start passes Node flags: ${flags.join(' ')}`);
  t.same(dockerCmd(), flags, 'Dockerfile CMD');
  t.same(GATEWAY_NODE_ARGS, flags, 'the bench harnesses');

  // A misspelt V8 flag stops Node at start ("bad option"), so the service would not start at all.
  const { stderr } = await promisify(execFile)(process.execPath, [...flags, '-e', '0']);
  t.equal(stderr, '', 'node accepts them');
});
