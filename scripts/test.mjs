// npm test: compiles what the tests run into .tap-build/ (scripts/build-tests.mjs), then runs tap on
// the compiled test files. Arguments go to tap; a test file or folder named as written in the
// repository (test/events/feed.test.ts, test/events) is run as compiled (scripts/test-arguments.mjs):
//   npm test                                   the whole suite
//   npm test -- test/events/feed.test.ts       one file (more may follow, and folders)
//   npm test -- --jobs=4 --disable-coverage    tap's own options
// Coverage is measured on PostgreSQL only (scripts/test-coverage.mjs says why).
import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildTests, OUT } from './build-tests.mjs';
import { compiledArguments, optionsTakingValue } from './test-arguments.mjs';
import { withCoverageDefault } from './test-coverage.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));

const { compiled, removed, ms } = buildTests();
if (compiled || removed) process.stderr.write(`npm test: compiled ${compiled} files into .tap-build/ in ${ms} ms\n`);

const tap = path.join(root, 'node_modules', 'tap', 'dist', 'esm', 'run.mjs');

// tap builds its Test class with the plugins .taprc lists (here without @tapjs/typescript), but a run
// that finds it built otherwise (a fresh npm install) rebuilds it only for the next run: this one's
// test processes would still get the old plugins' loaders (ts-node). So build first when they differ.
const { TapConfig } = await import('@tapjs/config');
const config = await TapConfig.load();
const wanted = config.pluginSignature;
await import('@tapjs/core');
const { signature: built } = await import('@tapjs/test');
if (built !== wanted) {
  process.stderr.write('npm test: building tap with the plugins .taprc lists (once after an install)\n');
  const rebuilt = spawnSync(process.execPath, [tap, 'build'], { stdio: 'inherit' });
  if (rebuilt.status !== 0) process.exit(rebuilt.status ?? 1);
}
let tapArgs;
try {
  tapArgs = compiledArguments(process.argv.slice(2), { root, out: OUT, takesValue: optionsTakingValue(config.jack.toJSON()) });
} catch (err) {
  process.stderr.write(`npm test: ${err.message}\n`);
  process.exit(2);
}
const args = withCoverageDefault(tapArgs, process.env);
const child = spawn(process.execPath, [tap, ...args], { stdio: 'inherit' });
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
child.on('exit', (code, signal) => {
  if (signal) {
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
  } else {
    process.exit(code ?? 1);
  }
});
