import { readdir, readFile } from 'node:fs/promises';
import { join, relative, resolve } from 'node:path';
import t from 'tap';
import { ROOT } from './helpers/root.js';

const SRC = `${ROOT}src/`;
const IMPORT = /(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)\.js'/g;

async function sources(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const nested = await Promise.all(entries.map((e) => (e.isDirectory() ? sources(join(dir, e.name)) : [join(dir, e.name)])));
  return nested.flat().filter((f) => f.endsWith('.ts'));
}

/** Every import circle among src's files, each as its files in order (empty when arrows only run downwards). */
function circles(graph: Map<string, string[]>): string[][] {
  const found: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const path: string[] = [];
  const visit = (file: string) => {
    state.set(file, 'open');
    path.push(file);
    for (const next of graph.get(file) ?? []) {
      if (state.get(next) === 'open') found.push(path.slice(path.indexOf(next)));
      else if (!state.has(next)) visit(next);
    }
    path.pop();
    state.set(file, 'done');
  };
  for (const file of graph.keys()) if (!state.has(file)) visit(file);
  return found;
}

/** Every src file (relative to src/) with the src files it imports. */
async function importGraph(): Promise<Map<string, string[]>> {
  const graph = new Map<string, string[]>();
  for (const file of await sources(SRC)) {
    const text = await readFile(file, 'utf8');
    const targets = [...text.matchAll(IMPORT)].map((m) => relative(SRC, resolve(file, '..', `${m[1]}.ts`)));
    graph.set(relative(SRC, file), targets);
  }
  return graph;
}

/**
 * The lower layer (docs/layout.md): the foundation every capability may import, and the concepts
 * moved down below the capabilities that share them (access checks, NOTIFY channels). None of it
 * imports a capability.
 */
const LOWER = new Set(['config', 'db', 'http', 'observability', 'timing', 'tracing', 'cpf.ts', 'digit-escapes.ts', 'access', 'channels']);

/** The folder of a src file, or the file itself at the root. */
const place = (file: string) => file.split('/')[0]!;

/** Every import that runs upward from the lower layer, as `importer -> imported`. */
function upwardImports(graph: Map<string, string[]>): string[] {
  return [...graph].flatMap(([file, targets]) =>
    LOWER.has(place(file)) ? targets.filter((target) => !LOWER.has(place(target))).map((target) => `${file} -> ${target}`) : [],
  );
}

t.test('src has no import circle', async (t) => {
  const graph = await importGraph();
  t.ok(graph.size > 40, 'every source file was read');
  t.same(circles(graph), [], 'no file imports, directly or not, a file that imports it');
});

t.test('a circle is found when there is one', async (t) => {
  const graph = new Map([
    ['a.ts', ['b.ts']],
    ['b.ts', ['c.ts']],
    ['c.ts', ['a.ts']],
  ]);
  t.same(circles(graph), [['a.ts', 'b.ts', 'c.ts']]);
});

t.test('the lower layer imports no capability', async (t) => {
  const graph = await importGraph();
  for (const folder of LOWER) t.ok([...graph.keys()].some((file) => place(file) === folder), `${folder} is in src`);
  t.same(upwardImports(graph), [], 'the lower layer imports only itself');
});

t.test('an import from the lower layer up to a capability is found', async (t) => {
  const graph = new Map([
    ['config/config.ts', ['config/env.ts', 'provider/schemas.ts']],
    ['config/env.ts', []],
    ['provider/schemas.ts', ['config/env.ts']],
  ]);
  t.same(upwardImports(graph), ['config/config.ts -> provider/schemas.ts']);
});
