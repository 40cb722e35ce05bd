// Compiles the TypeScript the tests run (src/, migrations/, test/, bench/) into .tap-build/, one
// JavaScript file and source map per file, for `npm test` (scripts/test.mjs). Transpile only, as
// the tests were compiled before (ts-node with swc): `npm run typecheck` is the type check.
//   node scripts/build-tests.mjs   compile what changed since the last run; remove what lost its source
//
// Why compile first: tap ran each test file through ts-node, a module loader. On Node 20 a loader
// runs on a thread of its own and each of the thousand modules a test process loads crosses to it
// and back; that cost more than the tests themselves in many files (docs/testing.md has the figures).
// The layout mirrors the repository's (.tap-build/src, .tap-build/test, ...) one level down, as
// dist/ does, so that code finding files relative to itself (migrations, bench/wrk) finds them.
import { transformFileSync, version } from '@swc/core';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
export const OUT = path.join(root, '.tap-build');
const SOURCES = ['src', 'migrations', 'test', 'bench'];
// The console's browser code (src/console/ui) is bundled by esbuild (scripts/build.mjs); its .ts
// modules are compiled here too, since tests import them, its .tsx not.
const SKIP = new Set([path.join('bench', 'results')]);

/** Every .ts file (not .d.ts) under a directory, relative to the root. */
function sources(dir, found = []) {
  if (SKIP.has(dir)) return found;
  for (const entry of readdirSync(path.join(root, dir), { withFileTypes: true })) {
    const relative = path.join(dir, entry.name);
    if (entry.isDirectory()) sources(relative, found);
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) found.push(relative);
  }
  return found;
}

function mtime(file) {
  try {
    return statSync(file).mtimeMs;
  } catch {
    return -1;
  }
}

// What ts-node gave swc for this tsconfig (ES2022: ts-node does not map ES2023 to swc), so that
// the compiled tests behave as they did under ts-node: class fields keep define semantics.
const OPTIONS = {
  swcrc: false,
  sourceMaps: true,
  module: { type: 'es6', strictMode: true, noInterop: false },
  jsc: {
    parser: { syntax: 'typescript', tsx: false, dynamicImport: true },
    target: 'es2022',
    keepClassNames: true,
  },
};

// What the files were compiled with: when it changes (options, swc's version), everything is compiled again.
const STAMP = path.join(OUT, '.compiled-with.json');
const compiledWith = JSON.stringify({ swc: version, options: OPTIONS });

export function buildTests() {
  const started = Date.now();
  const wanted = new Set([STAMP]);
  let compiled = 0;
  if (!existsSync(STAMP) || readFileSync(STAMP, 'utf8') !== compiledWith) rmSync(OUT, { recursive: true, force: true });
  for (const file of SOURCES.flatMap((dir) => sources(dir))) {
    const out = path.join(OUT, file.replace(/\.ts$/, '.js'));
    wanted.add(out);
    wanted.add(`${out}.map`);
    const source = path.join(root, file);
    if (mtime(out) >= mtime(source)) continue;
    const { code, map } = transformFileSync(source, { ...OPTIONS, filename: source, sourceFileName: path.relative(path.dirname(out), source) });
    mkdirSync(path.dirname(out), { recursive: true });
    writeFileSync(`${out}.map`, map);
    writeFileSync(out, `${code}\n//# sourceMappingURL=${path.basename(out)}.map\n`);
    compiled++;
  }
  let removed = 0;
  const prune = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) prune(full);
      else if (!wanted.has(full)) {
        rmSync(full);
        removed++;
      }
    }
  };
  mkdirSync(OUT, { recursive: true });
  prune(OUT);
  writeFileSync(STAMP, compiledWith);
  return { compiled, removed, ms: Date.now() - started };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { compiled, removed, ms } = buildTests();
  process.stderr.write(`build-tests: ${compiled} compiled, ${removed} removed in ${ms} ms (.tap-build/)\n`);
}
