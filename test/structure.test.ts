import { readdir, readFile } from 'node:fs/promises';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';

const SRC = fileURLToPath(new URL('../src/', import.meta.url));
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

t.test('src has no import circle', async (t) => {
  const graph = new Map<string, string[]>();
  for (const file of await sources(SRC)) {
    const text = await readFile(file, 'utf8');
    const targets = [...text.matchAll(IMPORT)].map((m) => relative(SRC, resolve(file, '..', `${m[1]}.ts`)));
    graph.set(relative(SRC, file), targets);
  }
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
