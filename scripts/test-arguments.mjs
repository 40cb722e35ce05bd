// npm test's arguments as tap gets them: a test file or folder named as written in the repository
// (test/events/feed.test.ts, test/events) becomes its compiled place in .tap-build/. An option's
// value is never a test to map, whether written after `=` or as the next word (`--grep test`,
// `-g test`, `--before test/setup.ts`): which options take one is read from tap's own definitions.
import { existsSync } from 'node:fs';
import path from 'node:path';

/** The names (`--grep`) and short forms (`-g`) of the options that take a value, from tap's jack definitions. */
export function optionsTakingValue(definitions) {
  const names = new Set();
  for (const [name, definition] of Object.entries(definitions)) {
    if (definition.type === 'boolean') continue;
    names.add(`--${name}`);
    if (definition.short) names.add(`-${definition.short}`);
  }
  return names;
}

/**
 * tap's arguments: each test file or folder in its compiled place (under `out`), everything else as
 * given. Throws, naming the argument, for a `.ts` file the build does not compile.
 */
export function compiledArguments(args, { root, out, takesValue, cwd = process.cwd() }) {
  const compiled = [];
  let value = false;
  for (const arg of args) {
    if (value) {
      compiled.push(arg);
      value = false;
    } else if (arg.startsWith('-')) {
      compiled.push(arg);
      value = takesValue.has(arg);
    } else {
      compiled.push(compiledPath(arg, root, out, cwd));
    }
  }
  return compiled;
}

function compiledPath(arg, root, out, cwd) {
  const relative = path.relative(root, path.resolve(cwd, arg));
  if (relative.startsWith('..') || relative.startsWith(`${path.basename(out)}${path.sep}`)) return arg;
  if (/\.ts$/.test(relative)) {
    const target = path.join(out, relative.replace(/\.ts$/, '.js'));
    if (!existsSync(target)) throw new Error(`${arg} is not a test file the build knows (it compiles src/, migrations/, test/ and bench/)`);
    return path.relative(cwd, target);
  }
  const folder = path.join(out, relative);
  return existsSync(folder) && relative !== '' ? path.relative(cwd, folder) : arg;
}
