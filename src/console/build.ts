import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { gzipSync } from 'node:zlib';
import * as esbuild from 'esbuild';
import { packageRoot } from '../config/package-root.js';
import { consoleAssetsDir } from './assets.js';

export interface BuiltFile {
  name: string;
  bytes: number;
  gzipBytes: number;
}

/**
 * Bundles the console (src/console/ui) into `outdir`: index.html, app-<hash>.js, app-<hash>.css and
 * the icon. Each file is written aside and renamed into place, so two builds at once (parallel test
 * files) never leave a half-written file, and a running gateway never serves one.
 */
export async function buildConsole(outdir = consoleAssetsDir()): Promise<BuiltFile[]> {
  const ui = join(packageRoot(), 'src', 'console', 'ui');
  const result = await esbuild.build({
    entryPoints: { app: join(ui, 'main.tsx') },
    bundle: true,
    format: 'esm',
    minify: true,
    target: ['chrome109', 'firefox115', 'safari16'],
    entryNames: '[name]-[hash]',
    outdir,
    write: false,
    tsconfig: join(ui, 'tsconfig.json'),
    jsx: 'automatic',
    jsxImportSource: 'preact',
    logLevel: 'silent',
  });
  const files = new Map<string, Buffer>();
  for (const out of result.outputFiles) files.set(basename(out.path), Buffer.from(out.contents));
  const js = [...files.keys()].find((n) => n.endsWith('.js'));
  const css = [...files.keys()].find((n) => n.endsWith('.css'));
  if (!js || !css) throw new Error('the console bundle lacks its script or its style sheet');
  const template = await readFile(join(ui, 'index.html'), 'utf8');
  files.set('index.html', Buffer.from(template.replace('{{script}}', js).replace('{{style}}', css)));
  files.set('favicon.svg', await readFile(join(ui, 'favicon.svg')));

  await mkdir(outdir, { recursive: true });
  for (const [name, body] of files) {
    const aside = join(outdir, `.${name}.${randomBytes(6).toString('hex')}`);
    await writeFile(aside, body);
    await rename(aside, join(outdir, name));
  }
  // Bundles of earlier sources go; the page names only the current ones.
  for (const name of await readdir(outdir)) {
    if (/^app-[A-Z0-9]+\.(js|css)$/.test(name) && !files.has(name)) await rm(join(outdir, name), { force: true });
  }
  return [...files].map(([name, body]) => ({ name, bytes: body.length, gzipBytes: gzipSync(body).length }));
}
