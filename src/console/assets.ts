import { readdir, readFile } from 'node:fs/promises';
import { extname, join } from 'node:path';
import { packageRoot } from '../config/package-root.js';

/** Where `npm run build` writes the console's bundle, and where the gateway serves it from. */
export const consoleAssetsDir = (): string => join(packageRoot(), 'dist', 'console');

export interface Asset {
  body: Buffer;
  type: string;
  /** Hashed names never change content, so they may be cached for good. */
  immutable: boolean;
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

/** Every file of the built console, by name; undefined when it has not been built. */
export async function loadAssets(dir: string): Promise<Map<string, Asset> | undefined> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return undefined;
  }
  if (!names.includes('index.html')) return undefined;
  const assets = new Map<string, Asset>();
  for (const name of names) {
    const type = TYPES[extname(name)];
    if (!type) continue;
    assets.set(name, { body: await readFile(join(dir, name)), type, immutable: /-[A-Z0-9]{8}\.(js|css)$/.test(name) });
  }
  return assets;
}
