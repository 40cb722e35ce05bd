import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/**
 * The repository's root directory, with a trailing separator. `npm test` runs the tests compiled
 * into `.tap-build/` (scripts/build-tests.mjs), one level below the tree they were compiled from, so a
 * test finds the repository's files (docs, deploy, migrations, the TypeScript sources) from here,
 * never relative to its own module.
 */
export const ROOT = (() => {
  const above = fileURLToPath(new URL('../..', import.meta.url));
  return path.basename(above) === '.tap-build' ? path.dirname(above) + path.sep : above;
})();

/** A file or directory of the repository, as a file: URL (for fs calls that take URLs). */
export const rootUrl = (relative: string) => new URL(relative, pathToFileURL(ROOT));
