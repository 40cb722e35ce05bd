import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import t from 'tap';

// The gateway's Node flags (its memory under load: bench/README.md) are written in four places:
// `npm start`, the Docker image's CMD, and the two bench harnesses that start it as `npm start`
// would. They must say the same, and Node must accept them.

const ROOT = fileURLToPath(new URL('..', import.meta.url));
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

/** The string literals of the array that follows `marker` in a TypeScript file. */
function arrayAfter(path: string, marker: string): string[] {
  const text = read(path);
  const at = text.indexOf(marker);
  if (at < 0) return [];
  const array = /\[([^\]]*)\]/.exec(text.slice(at + marker.length))![1]!;
  return [...array.matchAll(/'([^']*)'/g)].map((m) => m[1]!);
}

t.test('npm start, the Docker image and the bench harnesses run the gateway with the same Node flags', async (t) => {
  const flags = npmStart();
  t.ok(flags.length > 0, `npm start passes Node flags: ${flags.join(' ')}`);
  t.same(dockerCmd(), flags, 'Dockerfile CMD');
  t.same(arrayAfter('bench/run.ts', "BENCH_GATEWAY_NODE_ARGS?.split(/\\s+/).filter(Boolean) ??"), flags, 'bench/run.ts');
  t.same(arrayAfter('bench/cross-check.ts', 'nodeArgs:'), flags, 'bench/cross-check.ts');

  // A misspelt V8 flag stops Node at start ("bad option"), so the service would not start at all.
  const { stderr } = await promisify(execFile)(process.execPath, [...flags, '-e', '0']);
  t.equal(stderr, '', 'node accepts them');
});
