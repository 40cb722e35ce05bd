// Compiles src/, migrations/ and bench/ into dist/ (tsc -p tsconfig.build.json), then bundles the console page.
//   node scripts/build.mjs              always compile (npm run build)
//   node scripts/build.mjs --if-stale   compile only when an input is newer than the last build
//                                       (npm start and the other scripts: a second start is instant)
//   node scripts/build.mjs --install    as --if-stale, run by npm install; a failure is reported, not fatal
//   node scripts/build.mjs --check      compile nothing; exit 0 when dist/ is up to date, 1 when not
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const stamp = path.join(root, 'dist', '.build-stamp');
const inputs = ['src', 'migrations', 'bench', 'tsconfig.json', 'tsconfig.build.json', 'package.json', 'package-lock.json'];
const mode = process.argv[2];

/** Newest modification time under a path; a directory's own time counts, so a deleted file counts too. */
function newest(target) {
  let stat;
  try {
    stat = statSync(target);
  } catch {
    return 0;
  }
  let time = stat.mtimeMs;
  if (stat.isDirectory()) {
    for (const entry of readdirSync(target)) {
      if (entry === 'results' || entry === 'node_modules') continue;
      time = Math.max(time, newest(path.join(target, entry)));
    }
  }
  return time;
}

function builtAt() {
  try {
    return statSync(stamp).mtimeMs;
  } catch {
    return -1;
  }
}

if (mode === '--if-stale' || mode === '--install' || mode === '--check') {
  const changed = Math.max(...inputs.map((i) => newest(path.join(root, i))));
  if (builtAt() >= changed) process.exit(0);
  if (mode === '--check') process.exit(1);
}

let tsc;
try {
  tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
} catch {
  process.stderr.write('build: TypeScript is not installed (npm install installs it with the other development dependencies)\n');
  process.exit(mode === '--install' ? 0 : 1);
}
if (mode !== undefined) process.stderr.write('build: compiling TypeScript into dist/ (once; later starts reuse it)\n');
const started = Date.now();
const result = spawnSync(process.execPath, [tsc, '-p', path.join(root, 'tsconfig.build.json')], { cwd: root, stdio: 'inherit' });
if (result.status !== 0) {
  if (mode === '--install') {
    process.stderr.write('build: TypeScript did not compile; npm start will try again and show why\n');
    process.exit(0);
  }
  process.exit(result.status ?? 1);
}
// The console page is bundled by esbuild from the compiled bundler (dist/console/).
const page = spawnSync(process.execPath, [path.join(root, 'dist', 'src', 'console', 'build-cli.js')], { cwd: root, stdio: 'inherit' });
if (page.status !== 0) {
  if (mode === '--install') {
    process.stderr.write('build: the console page did not bundle; npm start will try again and show why\n');
    process.exit(0);
  }
  process.exit(page.status ?? 1);
}
writeFileSync(stamp, `${new Date().toISOString()}\n`);
if (mode !== undefined) process.stderr.write(`build: done in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
